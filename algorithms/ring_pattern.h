// Index math of ring schedules: how a vector is split into one block per rank, and which
// block a rank sends and receives at each ring step.
//
// Ring steps are numbered the same way by every ring collective: steps [0, p-1) are the
// reduce-scatter half, steps [p-1, 2p-2) the all-gather half. At step s rank r sends block
// (r-s-1) mod p to rank r+1 and receives block (r-s-2) mod p from rank r-1, so the block
// received at step s is the one sent at step s+1. After step p-2, rank r holds block r
// fully reduced; the all-gather half then circulates the reduced blocks, starting with
// block r at step p-1.
#pragma once

#include <cstddef>
#include <cstdint>

namespace collx {
namespace algo {

// a mod p in [0, p), also for negative a.
inline int ring_mod(int64_t a, int p) {
  int64_t m = a % p;
  return static_cast<int>(m < 0 ? m + p : m);
}

inline int ring_right(int rank, int size) { return ring_mod(rank + 1, size); }
inline int ring_left(int rank, int size) { return ring_mod(rank - 1, size); }
inline int ring_send_block(int rank, int size, int step) { return ring_mod(int64_t{rank} - step - 1, size); }
inline int ring_recv_block(int rank, int size, int step) { return ring_mod(int64_t{rank} - step - 2, size); }

// `count` elements split into `parts` blocks as evenly as possible: the first count % parts
// blocks get one element more. Blocks may be empty when count < parts.
class BlockLayout {
 public:
  BlockLayout(size_t count, int parts)
      : base_(count / static_cast<size_t>(parts)), extra_(count % static_cast<size_t>(parts)) {}

  size_t offset(int block) const {
    size_t b = static_cast<size_t>(block);
    return b * base_ + (b < extra_ ? b : extra_);
  }
  size_t length(int block) const { return base_ + (static_cast<size_t>(block) < extra_ ? 1 : 0); }
  size_t max_length() const { return base_ + (extra_ > 0 ? 1 : 0); }

 private:
  size_t base_;
  size_t extra_;
};

}  // namespace algo
}  // namespace collx
