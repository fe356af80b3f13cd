// The registration cache that backs reused buffers with huge pages: when it collapses, what,
// how often, and that a real collapse keeps the buffer's contents and gives it huge pages.
#include "transports/shm/shm_huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace collx {
namespace shm {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

struct Recorder {
  std::vector<std::pair<uintptr_t, size_t>> calls;
  int answer = 0;
  HugePageCache::CollapseFn fn() {
    return [this](void* p, size_t bytes) {
      calls.emplace_back(reinterpret_cast<uintptr_t>(p), bytes);
      return answer;
    };
  }
};

// An address with the alignment we want (never dereferenced by the fake collapse).
const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(HugePageCache, CollapsesTheAlignedInteriorOnceOnTheThirdOffer) {
  Recorder rec;
  HugePageCache cache(kHuge, 3, 8, rec.fn());
  const uintptr_t base = 64 * kHuge + 4096;  // not aligned: the interior starts one huge page on
  cache.offer(at(base), 5 * kHuge);
  cache.offer(at(base), 5 * kHuge);
  EXPECT_TRUE(rec.calls.empty());
  cache.offer(at(base), 5 * kHuge);
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0].first, 65 * kHuge);
  EXPECT_EQ(rec.calls[0].second, 4 * kHuge);  // [65, 69) huge pages: the tail page is partial
  for (int i = 0; i < 5; ++i) cache.offer(at(base), 5 * kHuge);
  EXPECT_EQ(rec.calls.size(), 1u) << "collapsed once, never again";
  const HugePageCache::Stats st = cache.stats();
  EXPECT_EQ(st.offers, 8u);
  EXPECT_EQ(st.collapses, 1u);
  EXPECT_EQ(st.collapsed_bytes, 4 * kHuge);
  EXPECT_EQ(st.failures, 0u);
}

TEST(HugePageCache, BuffersWithoutAWholeAlignedHugePageAreLeftAlone) {
  Recorder rec;
  HugePageCache cache(kHuge, 1, 8, rec.fn());
  cache.offer(at(10 * kHuge), kHuge - 4096);     // smaller than one
  cache.offer(at(10 * kHuge + 4096), kHuge);     // as large as one, but straddles two
  cache.offer(at(UINTPTR_MAX - kHuge), 2 * kHuge);  // wraps around the address space
  EXPECT_TRUE(rec.calls.empty());
  cache.offer(at(10 * kHuge), kHuge);
  EXPECT_EQ(rec.calls.size(), 1u);
}

TEST(HugePageCache, AFailedCollapseIsCountedAndNotRetried) {
  Recorder rec;
  rec.answer = EINVAL;
  HugePageCache cache(kHuge, 1, 8, rec.fn());
  for (int i = 0; i < 4; ++i) cache.offer(at(20 * kHuge), 2 * kHuge);
  EXPECT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(cache.stats().failures, 1u);
  EXPECT_EQ(cache.stats().collapsed_bytes, 0u);
}

TEST(HugePageCache, SmallerCallsInsideACollapsedBufferCostNothing) {
  Recorder rec;
  HugePageCache cache(kHuge, 1, 8, rec.fn());
  cache.offer(at(30 * kHuge), 8 * kHuge);
  cache.offer(at(30 * kHuge), 4 * kHuge);
  cache.offer(at(32 * kHuge), 2 * kHuge);
  EXPECT_EQ(rec.calls.size(), 1u);
  cache.offer(at(37 * kHuge), 2 * kHuge);  // sticks out of it: a buffer of its own
  EXPECT_EQ(rec.calls.size(), 2u);
}

TEST(HugePageCache, TheLeastRecentlyOfferedBufferIsForgottenFirst) {
  Recorder rec;
  HugePageCache cache(kHuge, 2, 2, rec.fn());
  cache.offer(at(40 * kHuge), kHuge);  // A: 1 use
  cache.offer(at(50 * kHuge), kHuge);  // B: 1 use
  cache.offer(at(40 * kHuge), kHuge);  // A: 2 uses -> collapsed
  ASSERT_EQ(rec.calls.size(), 1u);
  cache.offer(at(60 * kHuge), kHuge);  // C evicts B (least recent), not A
  cache.offer(at(50 * kHuge), kHuge);  // B again: evicts A, counts from 1
  EXPECT_EQ(rec.calls.size(), 1u);
  cache.offer(at(50 * kHuge), kHuge);  // B: 2 uses
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[1].first, 50 * kHuge);
}

// kB of AnonHugePages in the mapping that holds `p` (/proc/self/smaps).
long anon_huge_kb_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

TEST(HugePageCache, AReusedBufferKeepsItsContentsAndGetsHugePages) {
  const size_t huge = HugePageCache::host_huge_page_bytes();
  const size_t bytes = 4 * huge;
  const size_t mapped = bytes + 2 * huge;
  void* map = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(map) + huge - 1) & ~(uintptr_t{huge} - 1);
  auto* buf = reinterpret_cast<unsigned char*>(aligned) + 4096;  // unaligned, as malloc gives
  for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(i * 131 + 7);
  HugePageCache cache(huge, 2, 8, &HugePageCache::collapse_with_madvise);
  cache.offer(buf, bytes);
  EXPECT_EQ(cache.stats().collapses, 0u);
  cache.offer(buf, bytes);
  const HugePageCache::Stats st = cache.stats();
  EXPECT_EQ(st.collapses, 1u);
  if (st.failures != 0) {
    munmap(map, mapped);
    GTEST_SKIP() << "this kernel cannot collapse into huge pages (MADV_COLLAPSE needs Linux 6.1 and THP)";
  }
  EXPECT_EQ(st.collapsed_bytes, 3 * huge);  // the partial first and last ones stay small
  EXPECT_GE(anon_huge_kb_at(buf), static_cast<long>(3 * huge / 1024));
  for (size_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(buf[i], static_cast<unsigned char>(i * 131 + 7)) << "byte " << i;
  }
  munmap(map, mapped);
}

}  // namespace
}  // namespace shm
}  // namespace collx
