// Single-producer / single-consumer rings of fixed-size cells in a shared segment, and the
// cell format. The producer is the one sending rank, the consumer the segment's owner; each
// side is driven under its engine's mutex, so one thread at a time touches each end.
//
// Indices are read from memory the other process can scribble on: every read is checked
// (0 <= tail - head <= ncells) and a violation is reported, never trusted.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

// ThreadSanitizer cannot see that two mappings of one shared page are the same memory, so
// the release/acquire pairs on ring indices (and state words) do not order anything for it
// when ranks are threads of one process. Under TSAN, each handoff is also announced on a
// process-wide sync address chosen by a key both sides compute (comm, sender, receiver).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif
namespace collx {
namespace shm {
void* tsan_sync_address(uint64_t comm_id, uint64_t a, uint64_t b);  // nullptr unless TSAN
inline void tsan_release(void* key) {
#if defined(__SANITIZE_THREAD__)
  if (key != nullptr) __tsan_release(key);
#else
  (void)key;
#endif
}
inline void tsan_acquire(void* key) {
#if defined(__SANITIZE_THREAD__)
  if (key != nullptr) __tsan_acquire(key);
#else
  (void)key;
#endif
}

enum class CellType : uint32_t {
  kEager = 1,       // payload inline; offset 0 announces the message
  kRts = 2,         // rendezvous announcement: payload is an RtsBody
  kChunk = 3,       // a piece of a rendezvous message, sent because the receiver asked
  kAck = 4,         // control: the receiver pulled message msg_id, the buffer is free
  kSendChunks = 5,  // control: the receiver cannot pull message msg_id; send it in chunks
};

struct CellHeader {
  uint32_t type;
  uint32_t payload_bytes;  // bytes after the header in this cell
  uint64_t tag;
  uint64_t msg_id;
  uint64_t msg_bytes;
  uint64_t offset;         // of this cell's payload within the message
  transport::OpDesc desc;
};
static_assert(sizeof(CellHeader) == 64, "cell header layout");
constexpr uint32_t kCellPayload = kCellBytes - sizeof(CellHeader);

struct RtsBody {
  int64_t pid;
  uint64_t address;
};

constexpr uint64_t kMaxMessageBytes = 1ull << 40;  // 1 TiB: anything larger is garbage

// One end of a ring: the header and its cells, both in a segment mapping.
class RingView {
 public:
  RingView() = default;
  RingView(RingHeader* h, uint8_t* cells, uint32_t ncells, void* tsan_key = nullptr)
      : h_(h), cells_(cells), n_(ncells), tsan_key_(tsan_key) {}
  bool valid() const { return h_ != nullptr; }

  // ---- producer side
  // A cell to fill, or nullptr when full. Sets `*corrupt` when the indices are impossible.
  uint8_t* producer_slot(bool* corrupt) {
    uint64_t head = h_->head.load(std::memory_order_acquire);
    uint64_t tail = h_->tail.load(std::memory_order_relaxed);
    if (tail - head > n_) {
      *corrupt = true;
      return nullptr;
    }
    if (tail - head == n_) {
      h_->producer_waiting.store(1, std::memory_order_seq_cst);
      // Re-check: the consumer may have emptied a cell before it could see the flag.
      head = h_->head.load(std::memory_order_seq_cst);
      if (tail - head >= n_) return nullptr;
    }
    tsan_acquire(tsan_key_);  // the consumer is done with the cell we are about to reuse
    return cells_ + (tail % n_) * size_t{kCellBytes};
  }
  void produce() {
    tsan_release(tsan_key_);
    h_->tail.store(h_->tail.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // ---- consumer side
  // The next cell, or nullptr when empty.
  const uint8_t* consumer_slot(bool* corrupt) const {
    uint64_t tail = h_->tail.load(std::memory_order_acquire);
    uint64_t head = h_->head.load(std::memory_order_relaxed);
    if (tail - head > n_) {
      *corrupt = true;
      return nullptr;
    }
    if (tail == head) return nullptr;
    tsan_acquire(tsan_key_);
    return cells_ + (head % n_) * size_t{kCellBytes};
  }
  // Frees the cell. True when the producer was waiting for space (it must be woken).
  bool consume() {
    tsan_release(tsan_key_);
    h_->head.store(h_->head.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
    if (h_->producer_waiting.load(std::memory_order_seq_cst) != 0) {
      h_->producer_waiting.store(0, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

 private:
  RingHeader* h_ = nullptr;
  uint8_t* cells_ = nullptr;
  uint32_t n_ = 0;
  void* tsan_key_ = nullptr;
};

}  // namespace shm
}  // namespace collx
