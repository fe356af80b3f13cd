// RingView and segment geometry on local memory: ordering, full/empty, and indices a
// hostile peer could write (reported as corrupt, never used).
#include <gtest/gtest.h>

#include <vector>

#include "transports/shm/shm_ring.h"

namespace collx {
namespace shm {
namespace {

struct LocalRing {
  explicit LocalRing(uint32_t n) : mem(sizeof(RingHeader) + size_t{n} * kCellBytes + 64), n(n) {
    auto base = reinterpret_cast<uintptr_t>(mem.data());
    hdr = new (reinterpret_cast<void*>((base + 63) & ~uintptr_t{63})) RingHeader();
  }
  RingView view() { return RingView(hdr, reinterpret_cast<uint8_t*>(hdr) + sizeof(RingHeader), n); }
  std::vector<uint8_t> mem;
  uint32_t n;
  RingHeader* hdr;
};

TEST(ShmRing, FifoFullAndEmpty) {
  LocalRing r(4);
  RingView prod = r.view(), cons = r.view();
  bool corrupt = false;
  EXPECT_EQ(cons.consumer_slot(&corrupt), nullptr);
  for (uint32_t i = 0; i < 4; ++i) {
    uint8_t* s = prod.producer_slot(&corrupt);
    ASSERT_NE(s, nullptr);
    s[0] = static_cast<uint8_t>(i);
    prod.produce();
  }
  EXPECT_EQ(prod.producer_slot(&corrupt), nullptr);       // full
  EXPECT_EQ(r.hdr->producer_waiting.load(), 1u);          // and asked to be woken
  for (uint32_t i = 0; i < 4; ++i) {
    const uint8_t* s = cons.consumer_slot(&corrupt);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s[0], i);
    EXPECT_EQ(cons.consume(), i == 0);                    // first consume wakes the producer
  }
  EXPECT_EQ(cons.consumer_slot(&corrupt), nullptr);
  EXPECT_FALSE(corrupt);
}

TEST(ShmRing, ImpossibleIndicesAreReported) {
  LocalRing r(4);
  RingView v = r.view();
  r.hdr->tail.store(100);  // a peer claims 100 cells in a 4-cell ring
  bool corrupt = false;
  EXPECT_EQ(v.consumer_slot(&corrupt), nullptr);
  EXPECT_TRUE(corrupt);
  corrupt = false;
  r.hdr->tail.store(0);
  r.hdr->head.store(5);  // head past tail
  EXPECT_EQ(v.producer_slot(&corrupt), nullptr);
  EXPECT_TRUE(corrupt);
}

TEST(ShmSegment, GeometryDoesNotOverlap) {
  for (int n : {1, 2, 8, 64}) {
    EXPECT_GE(data_ring_offset(n, 0), sizeof(SegmentHeader));
    for (int s = 0; s + 1 < n; ++s) EXPECT_LE(ctrl_ring_offset(n, s) + sizeof(RingHeader) + kCtrlCells * kCellBytes, data_ring_offset(n, s + 1));
    EXPECT_LE(ctrl_ring_offset(n, n - 1) + sizeof(RingHeader) + kCtrlCells * kCellBytes, segment_bytes(n));
    EXPECT_EQ(data_ring_offset(n, 0) % 64, 0u);
  }
}

}  // namespace
}  // namespace shm
}  // namespace collx
