// ScratchPool: temporary buffers reused across collectives of one communicator, so a large
// collective does not pay for fresh pages (page faults) on every call.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace collx {

class ScratchPool {
 public:
  ScratchPool() = default;
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // A 64-byte aligned buffer of at least `bytes` bytes, distinct for each `slot` (0..7),
  // valid until the next call with the same slot or the pool's destruction. nullptr when
  // out of memory. Not thread-safe: one collective at a time uses a communicator's pool.
  void* get(int slot, size_t bytes) {
    if (slot < 0 || slot >= kSlots) return nullptr;
    Slot& s = slots_[slot];
    if (s.capacity < bytes) {
      size_t capacity = bytes < 4096 ? 4096 : bytes;
      capacity = (capacity + 63) & ~static_cast<size_t>(63);
      void* p = std::aligned_alloc(64, capacity);
      if (!p) return nullptr;
      s.data.reset(p);
      s.capacity = capacity;
    }
    return s.data.get();
  }

  // Drops every buffer (e.g. after a one-off large collective).
  void release() {
    for (auto& s : slots_) {
      s.data.reset();
      s.capacity = 0;
    }
  }

 private:
  static constexpr int kSlots = 8;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
  };
  Slot slots_[kSlots];
};

}  // namespace collx
