#include "transports/shm/shm_huge_pages.h"

#include <errno.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstring>

#include "lib/common/log.h"
#include "lib/common/settings.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 (older headers lack it; older kernels answer EINVAL)
#endif

namespace collx {
namespace shm {

HugePageCache::HugePageCache(size_t huge_page_bytes, size_t min_uses, size_t capacity, CollapseFn collapse)
    : huge_(huge_page_bytes), min_uses_(min_uses < 1 ? 1 : min_uses), capacity_(capacity < 1 ? 1 : capacity),
      collapse_(std::move(collapse)) {}

void HugePageCache::offer(const void* p, size_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  if (huge_ == 0 || bytes < huge_ || start > UINTPTR_MAX - bytes) return;
  const uintptr_t begin = (start + huge_ - 1) & ~(uintptr_t{huge_} - 1);
  const uintptr_t end = (start + bytes) & ~(uintptr_t{huge_} - 1);
  if (end <= begin) return;
  Entry* hit = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.offers;
    ++clock_;
    for (Entry& e : entries_) {
      if (e.begin == begin && e.end == end) {
        hit = &e;
        break;
      }
      // Inside an interior already collapsed (a smaller call on the same buffer): nothing to do.
      if (e.done && e.begin <= begin && end <= e.end) {
        e.last_offer = clock_;
        return;
      }
    }
    if (hit == nullptr) {
      if (entries_.size() < capacity_) {
        entries_.emplace_back();
        hit = &entries_.back();
      } else {
        hit = &entries_[0];
        for (Entry& e : entries_) {
          if (e.last_offer < hit->last_offer) hit = &e;
        }
      }
      *hit = Entry{begin, end, 0, false, 0};
    }
    hit->last_offer = clock_;
    if (hit->done || ++hit->uses < min_uses_) return;
    // Decided under the lock, so two threads offering one buffer collapse it once.
    hit->done = true;
    ++stats_.collapses;
  }
  const int error = collapse_(reinterpret_cast<void*>(begin), end - begin);
  std::lock_guard<std::mutex> lock(mu_);
  if (error == 0) {
    stats_.collapsed_bytes += end - begin;
    COLLX_INFO(NET, "shm: %zu bytes at %p now in huge pages (buffer read by peers, offered %zu times)",
               static_cast<size_t>(end - begin), reinterpret_cast<void*>(begin), min_uses_);
  } else {
    ++stats_.failures;
    COLLX_INFO(NET, "shm: cannot back %zu bytes at %p with huge pages (%s); peers read it from small pages",
               static_cast<size_t>(end - begin), reinterpret_cast<void*>(begin), std::strerror(error));
  }
}

HugePageCache::Stats HugePageCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int HugePageCache::collapse_with_madvise(void* p, size_t bytes) {
  return ::madvise(p, bytes, MADV_COLLAPSE) == 0 ? 0 : errno;
}

size_t HugePageCache::host_huge_page_bytes() {
  size_t bytes = 0;
  if (FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "re")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1) bytes = static_cast<size_t>(v);
    std::fclose(f);
  }
  // A power of two or nothing.
  if (bytes == 0 || (bytes & (bytes - 1)) != 0) bytes = size_t{2} << 20;
  return bytes;
}

HugePageCache* process_huge_pages() {
  static HugePageCache* cache = []() -> HugePageCache* {
    bool on = true;
    const Status s = setting_bool(SettingId::SHM_HUGE_PAGES, &on);
    if (!s.ok()) {
      COLLX_WARN(NET, "%s; huge pages for peers' reads stay off", s.message().c_str());
      return nullptr;
    }
    if (!on) return nullptr;
    // Collapsed from the third offer: an in-place call offers its buffer twice, so a buffer
    // is collapsed on its second call in place, its third out of place.
    return new HugePageCache(HugePageCache::host_huge_page_bytes(), 3, 64, &HugePageCache::collapse_with_madvise);
  }();
  return cache;
}

}  // namespace shm
}  // namespace collx
