// RequestSet: the transport requests of one collective, owned together. Posting goes
// through it so every message gets the collective's tag (coll_tag(seq, step)) and OpDesc,
// and every wait uses the collective's deadline. When the set goes out of scope, requests
// still pending are cancelled: an early error return therefore leaves nothing behind that
// could touch the caller's buffers (or scratch) later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "algorithms/algorithm.h"

namespace collx {
namespace algo {

class RequestSet {
 public:
  RequestSet(const Context& ctx, const CollArgs& args, size_t capacity);
  ~RequestSet() { cancel_pending(); }
  RequestSet(const RequestSet&) = delete;
  RequestSet& operator=(const RequestSet&) = delete;

  // COLLX_ERR_NO_MEMORY when the requests could not be allocated; check before use.
  Status init_status() const;
  size_t capacity() const { return capacity_; }

  // Post into slot `index`; the slot must not hold a pending request. `step` must be unique
  // within the collective and below transport::kCollMaxSteps (COLLX_ERR_INTERNAL if not).
  Status post_send(size_t index, int peer, uint64_t step, const void* buf, size_t bytes);
  Status post_recv(size_t index, int peer, uint64_t step, void* buf, size_t bytes);

  // Wait for slot `index` (at once when it was never posted or is done). Returns the
  // request's failure, also when it failed earlier.
  Status wait(size_t index);
  // Wait for every slot.
  Status wait_all();

  // Cancel every request not yet done (the destructor does this too).
  void cancel_pending();

 private:
  transport::Transport* transport_;
  const int* rank_at_;  // Context::rank_at: positions to transport ranks (nullptr: same)
  transport::OpDesc desc_;
  Deadline deadline_;
  size_t capacity_;
  std::unique_ptr<transport::Request[]> requests_;
};

}  // namespace algo
}  // namespace collx
