// Registration cache of this process's ordinary buffers that peers read with cross-memory
// attach (process_vm_readv), backing the ones used again and again with huge pages.
//
// Why: a cross-memory-attach read costs the kernel a pin and a page-table walk per page of
// the *source* process. With 4 KiB pages that, not the copy, bounds the reads (measured on the
// CI VM: 6-10 GB/s from 4 KiB pages, 17-20 GB/s from 2 MiB pages; docs/tuning.md). Zero-copy
// buffers (collx_mem_alloc) avoid the kernel; ordinary ones can at least make its walk cheap.
//
// What: every buffer the shared-memory collectives offer to their peers is counted here by
// its huge-page-aligned interior. The `min_uses`-th time the same interior is offered, it is
// collapsed into transparent huge pages (madvise MADV_COLLAPSE, Linux >= 6.1): same
// addresses, same contents, same protection; only the backing changes, once. A training step
// reuses its buffers, so it pays the collapse once (about a copy of the buffer) and every later
// read is faster; a buffer used once or twice pays nothing. Edges that do not fill a huge
// page, buffers smaller than one, and memory the process marked MADV_NOHUGEPAGE (the kernel
// refuses) are left as they are; a collapse that fails (a kernel without MADV_COLLAPSE, no
// huge page free) is not retried for that interior.
// The cache does not know when the caller frees a buffer: a new buffer at a collapsed
// address is left as it is until that entry is evicted (only speed depends on it).
//
// Threads: thread-safe (one mutex). COLLX_SHM_HUGE_PAGES=0 turns it off (process_huge_pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace collx {
namespace shm {

class HugePageCache {
 public:
  // Collapses [p, p + bytes) (aligned to huge pages); returns 0 or an errno value.
  using CollapseFn = std::function<int(void* p, size_t bytes)>;
  struct Stats {
    uint64_t offers = 0;           // buffers offered with at least one whole huge page
    uint64_t collapses = 0;        // collapse calls made
    uint64_t collapsed_bytes = 0;  // bytes they succeeded on
    uint64_t failures = 0;         // collapse calls that failed
  };

  // huge_page_bytes: a power of two (the host's PMD size); capacity: interiors remembered
  // (least recently offered evicted first).
  HugePageCache(size_t huge_page_bytes, size_t min_uses, size_t capacity, CollapseFn collapse);

  // [p, p + bytes) is about to be read by peers through the kernel.
  void offer(const void* p, size_t bytes);
  Stats stats() const;

  // madvise(MADV_COLLAPSE); 0 or errno.
  static int collapse_with_madvise(void* p, size_t bytes);
  // The host's transparent-huge-page size (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size),
  // 2 MiB when unreadable.
  static size_t host_huge_page_bytes();

 private:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    size_t uses = 0;
    bool done = false;  // collapsed, or the kernel refused it: never tried again
    uint64_t last_offer = 0;
  };

  const size_t huge_;
  const size_t min_uses_;
  const size_t capacity_;
  const CollapseFn collapse_;
  mutable std::mutex mu_;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
  Stats stats_;
};

// The process-wide cache the shm transport offers its buffers to; nullptr when
// COLLX_SHM_HUGE_PAGES=0 (read once).
HugePageCache* process_huge_pages();

}  // namespace shm
}  // namespace collx
