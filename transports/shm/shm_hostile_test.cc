// A hostile or corrupted peer: a fake rank 1 built from the segment primitives writes
// garbage into rank 0's rings / its own state word. Rank 0 must report COLLX_ERR_PROTOCOL
// (never crash, never write out of bounds).
#include <gtest/gtest.h>

#include "transports/shm/shm_ring.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm {
namespace {

using shm_test::Board;
using shm_test::BoardBootstrap;

// Brings up rank 0 (a real transport) and a fake rank 1; `attack` scribbles on rank 0's
// segment (mapped by the fake) or the fake's own header; rank 0's receive must fail cleanly.
void expect_protocol_error(const std::function<void(Segment& victim, Segment& fake)>& attack,
                           collx_status_t expected = COLLX_ERR_PROTOCOL) {
  auto board = std::make_shared<Board>(2);
  const uint64_t comm = shm_test::next_comm_id();
  std::unique_ptr<transport::Transport> t;
  BoardBootstrap boot0(board, 0), boot1(board, 1);
  std::thread real([&] {
    ShmTransportParams p = shm_test::make_params(0, 2, comm, &boot0);
    Status s = create_shm_transport(p, &t);
    ASSERT_TRUE(s.ok()) << s.message();
  });
  Segment fake, victim;
  std::string name;
  ASSERT_TRUE(make_segment_name(comm, 1, ::getpid(), &name).ok());
  ASSERT_TRUE(fake.create(name, comm, 1, 2).ok());
  std::vector<uint8_t> blob(4 + name.size());
  int32_t pid = ::getpid();
  std::memcpy(blob.data(), &pid, 4);
  std::memcpy(blob.data() + 4, name.data(), name.size());
  std::vector<std::vector<uint8_t>> all;
  ASSERT_TRUE(boot1.allgather("shm.segments", blob, &all, Deadline::after_ms(5000)).ok());
  std::string victim_name(all[0].begin() + 4, all[0].end());
  ASSERT_TRUE(victim.open(victim_name, comm, 0, 2, pid).ok());
  ASSERT_TRUE(boot1.allgather("shm.mapped", {1}, &all, Deadline::after_ms(5000)).ok());
  real.join();
  ASSERT_TRUE(t);
  std::vector<uint8_t> buf(100, 0xee);
  transport::Request r;
  ASSERT_TRUE(t->post_recv(&r, 1, 5, buf.data(), 10, transport::OpDesc{}).ok());
  attack(victim, fake);
  notify_segment(victim.header());
  Status s = shm_test::wait_one(t.get(), &r, 3000);
  EXPECT_EQ(s.code(), expected) << s.message();
  EXPECT_EQ(buf[10], 0xee);  // nothing written past the receive
}

RingView ring_from_fake(Segment& victim) {
  return RingView(victim.data_ring(1), victim.ring_cells(victim.data_ring(1)), kDataCells);
}

void push_cell(Segment& victim, const CellHeader& h, const void* payload = nullptr, size_t n = 0) {
  RingView ring = ring_from_fake(victim);
  bool corrupt = false;
  uint8_t* slot = ring.producer_slot(&corrupt);
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, &h, sizeof h);
  if (n > 0) std::memcpy(slot + sizeof h, payload, n);
  ring.produce();
}

CellHeader eager(uint64_t msg_id, uint64_t msg_bytes, uint64_t offset, uint32_t payload) {
  CellHeader h{};
  h.type = static_cast<uint32_t>(CellType::kEager);
  h.tag = 5;
  h.msg_id = msg_id;
  h.msg_bytes = msg_bytes;
  h.offset = offset;
  h.payload_bytes = payload;
  return h;
}

TEST(ShmHostile, ImpossibleRingIndices) {
  expect_protocol_error([](Segment& v, Segment&) { v.data_ring(1)->tail.store(1000000); });
}

TEST(ShmHostile, PayloadLongerThanCell) {
  expect_protocol_error([](Segment& v, Segment&) { push_cell(v, eager(1, 1u << 30, 0, 1u << 30)); });
}

TEST(ShmHostile, PayloadBeyondMessage) {
  expect_protocol_error([](Segment& v, Segment&) {
    uint8_t junk[64] = {};
    push_cell(v, eager(1, 10, 8, 64), junk, 64);  // offset 8 + 64 > 10
  });
}

TEST(ShmHostile, ContinuationOfUnknownMessage) {
  expect_protocol_error([](Segment& v, Segment&) {
    uint8_t junk[4] = {};
    push_cell(v, eager(7, 10, 4, 4), junk, 4);
  });
}

TEST(ShmHostile, OverlongFirstCellForReceive) {
  // A 10-byte message whose first cell claims 20 bytes: caught before the copy.
  expect_protocol_error([](Segment& v, Segment&) {
    uint8_t junk[20] = {};
    push_cell(v, eager(1, 10, 0, 20), junk, 20);
  });
}

TEST(ShmHostile, RendezvousFromAnotherPid) {
  expect_protocol_error([](Segment& v, Segment&) {
    CellHeader h = eager(1, 10, 0, sizeof(RtsBody));
    h.type = static_cast<uint32_t>(CellType::kRts);
    RtsBody body{1, 0x1000};  // pid 1 (init), not the sender
    push_cell(v, h, &body, sizeof body);
  });
}

TEST(ShmHostile, RendezvousToUnmappedAddress) {
  // Right pid (ranks are threads here: our own), wild address: EFAULT, not a crash.
  expect_protocol_error([](Segment& v, Segment&) {
    CellHeader h = eager(1, 10, 0, sizeof(RtsBody));
    h.type = static_cast<uint32_t>(CellType::kRts);
    RtsBody body{::getpid(), 0x10};
    push_cell(v, h, &body, sizeof body);
  });
}

TEST(ShmHostile, GarbageStateWord) {
  expect_protocol_error([](Segment&, Segment& f) { f.header()->state.store(77); });
}

TEST(ShmHostile, UnterminatedPoisonReason) {
  expect_protocol_error(
      [](Segment&, Segment& f) {
        std::memset(f.header()->reason, 'x', kReasonBytes);  // no NUL
        f.header()->reason_code.store(-12345);
        f.header()->state.store(static_cast<uint32_t>(RankState::kPoisoned));
      },
      COLLX_ERR_REMOTE);
}

}  // namespace
}  // namespace shm
}  // namespace collx
