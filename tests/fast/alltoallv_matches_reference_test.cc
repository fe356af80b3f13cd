// All-to-allv with uneven blocks per pair (empty ones included, MoE token routing), packed
// or placed by displacements with gaps on both sides, blocking and nonblocking, on every
// world size and transport: every received block equals what its sender put there and the
// gaps stay untouched. A pair whose counts disagree gets a mismatch, and bad arrays are
// rejected naming what is wrong.
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "tests/fast/sweep.h"
#include "tests/fast/v_layout.h"
#include "tests/support/reference.h"

namespace collx {
namespace testing {
namespace {

// Element i of the block rank `src` sends rank `dst` is input_value(src, dst * kStride + i).
constexpr size_t kStride = 1u << 20;

struct A2avCase {
  std::function<size_t(size_t src, size_t dst)> count;  // elements src sends dst
  VLayout layout = VLayout::kPacked;
  collx_datatype_t datatype = COLLX_INT32;
  bool nonblocking = false;
  std::string name;
};

size_t run_alltoallv(ThreadRanks& world, const A2avCase& c) {
  const size_t n = static_cast<size_t>(world.size());
  const size_t elem = collx_datatype_size(c.datatype);
  std::atomic<size_t> wrong_total{0};
  world.run([&](int rank, collx_comm_t comm) {
    const size_t me = static_cast<size_t>(rank);
    std::vector<size_t> sendcounts(n), recvcounts(n);
    for (size_t q = 0; q < n; ++q) {
      sendcounts[q] = c.count(me, q);
      recvcounts[q] = c.count(q, me);
    }
    const std::vector<size_t> sdispls = vlayout_displs(sendcounts, c.layout);
    const std::vector<size_t> rdispls = vlayout_displs(recvcounts, c.layout);
    std::vector<unsigned char> send(vlayout_extent(sendcounts, sdispls) * elem + 16, 0);
    std::vector<unsigned char> recv(vlayout_extent(recvcounts, rdispls) * elem + 16, kVPoison);
    for (size_t q = 0; q < n; ++q) {
      fill_input(send.data() + sdispls[q] * elem, sendcounts[q], q * kStride, rank, COLLX_SUM, c.datatype);
    }
    const collx_status_t rc = run_maybe_nonblocking(c.nonblocking, [&](collx_request_t* req) {
      const size_t* sd = vlayout_arg(sdispls, c.layout);
      const size_t* rd = vlayout_arg(rdispls, c.layout);
      return req ? collx_ialltoallv(send.data(), sendcounts.data(), sd, recv.data(), recvcounts.data(), rd,
                                    c.datatype, comm, nullptr, req)
                 : collx_alltoallv(send.data(), sendcounts.data(), sd, recv.data(), recvcounts.data(), rd,
                                   c.datatype, comm, nullptr);
    });
    if (rc != COLLX_OK) {
      ADD_FAILURE() << c.name << " rank " << rank << ": " << collx_status_name(rc) << ": " << collx_last_error(comm);
      wrong_total += 1;
      return;
    }
    size_t wrong = 0;
    for (size_t q = 0; q < n; ++q) {
      for (size_t i = 0; i < recvcounts[q]; ++i) {
        const double want = input_value(static_cast<int>(q), me * kStride + i, COLLX_SUM, c.datatype);
        if (!values_match(want, load_value(recv.data(), rdispls[q] + i, c.datatype), c.datatype, COLLX_SUM)) {
          if (wrong++ == 0) ADD_FAILURE() << c.name << " rank " << rank << ": block from " << q << " element " << i;
        }
      }
    }
    const size_t gaps = vlayout_gaps_written(recv, recvcounts, rdispls, elem);
    if (gaps > 0) ADD_FAILURE() << c.name << " rank " << rank << ": " << gaps << " gap elements written";
    wrong_total += wrong + gaps;
  });
  return wrong_total.load();
}

std::vector<A2avCase> cases() {
  std::vector<A2avCase> out;
  auto add = [&](const std::string& what, std::function<size_t(size_t, size_t)> count) {
    for (collx_datatype_t dt : {COLLX_UINT8, COLLX_BFLOAT16, COLLX_INT32, COLLX_FLOAT64}) {
      for (VLayout layout : {VLayout::kPacked, VLayout::kReversedWithGaps}) {
        A2avCase c;
        c.count = count;
        c.layout = layout;
        c.datatype = dt;
        c.nonblocking = layout == VLayout::kReversedWithGaps && dt == COLLX_INT32;
        c.name = what + "/" + collx_datatype_name(dt) + "/" + vlayout_name(layout) + (c.nonblocking ? "/nonblocking" : "");
        out.push_back(c);
      }
    }
  };
  add("uneven", [](size_t s, size_t d) { return (s * 3 + d * 5 + 1) % 7; });  // zeros on some pairs
  add("rank0_silent", [](size_t s, size_t d) { return s == 0 || d == 0 ? 0 : 100 + s + d; });
  add("all_empty", [](size_t, size_t) { return size_t{0}; });
  A2avCase large;  // expert routing with hot experts: large messages, rendezvous
  large.count = [](size_t s, size_t d) { return (size_t{1} << 14) * (1 + (s + 2 * d) % 3) + s; };
  large.layout = VLayout::kReversedWithGaps;
  large.datatype = COLLX_FLOAT32;
  large.name = "moe_large/float32";
  out.push_back(large);
  return out;
}

class AlltoallvSweep : public ::testing::TestWithParam<SweepWorld> {};

TEST_P(AlltoallvSweep, UnevenBlocksPerPairMatchReferenceAndGapsStayUntouched) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  int failing = 0;
  for (const A2avCase& c : cases()) {
    SCOPED_TRACE(c.name + " on " + std::to_string(world.size()) + " ranks");
    if (run_alltoallv(world, c) != 0 && ++failing >= 5) FAIL() << "stopping after 5 failing cases";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, AlltoallvSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

TEST(AlltoallvMismatch, SenderAndReceiverCountsThatDisagreeFailInsteadOfHanging) {
  ThreadRanks world(3, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<collx_status_t> rc(3);
  std::vector<std::string> msg(3);
  const auto start = std::chrono::steady_clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    // Everyone sends 2 elements to everyone, except that rank 0 sends rank 1 three; rank 1
    // expects two.
    std::vector<size_t> sendcounts = {2, 2, 2}, recvcounts = {2, 2, 2};
    if (rank == 0) sendcounts[1] = 3;
    std::vector<int32_t> send(16, rank), recv(16, -1);
    rc[rank] = collx_alltoallv(send.data(), sendcounts.data(), nullptr, recv.data(), recvcounts.data(), nullptr,
                               COLLX_INT32, comm, nullptr);
    msg[rank] = collx_last_error(comm);
    // A rank whose own messages all matched may finish; its next call learns of the failure.
    if (rc[rank] == COLLX_OK) rc[rank] = collx_barrier(comm, nullptr);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "a mismatch must not wait for the timeout";
  EXPECT_EQ(rc[1], COLLX_ERR_MISMATCH) << msg[1];
  EXPECT_NE(msg[1].find("alltoallv"), std::string::npos) << msg[1];
  for (int r = 0; r < 3; ++r) EXPECT_NE(rc[r], COLLX_OK) << "rank " << r << " (alltoallv, then a barrier)";
}

TEST(AlltoallvBadInput, EachBadArrayIsNamedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(64, 1.0f);
  float* send = buf.data();
  float* recv = buf.data() + 32;
  const size_t counts[2] = {4, 4}, other_self[2] = {3, 4}, overlapping[2] = {0, 2}, huge[2] = {4, SIZE_MAX - 1};
  struct Case {
    const char* what;
    std::function<collx_status_t()> call;
    const char* must_mention;
  };
  const std::vector<Case> bad = {
      {"null sendcounts", [&] { return collx_alltoallv(send, nullptr, nullptr, recv, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "sendcounts is NULL"},
      {"null recvcounts", [&] { return collx_alltoallv(send, counts, nullptr, recv, nullptr, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvcounts is NULL"},
      {"own block differs", [&] { return collx_alltoallv(send, other_self, nullptr, recv, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "sendcounts[0]"},
      {"overlapping blocks", [&] { return collx_alltoallv(send, counts, nullptr, recv, counts, overlapping, COLLX_FLOAT32, comm, nullptr); }, "overlap in recvbuf"},
      {"block past size_t", [&] { return collx_alltoallv(send, counts, nullptr, recv, huge, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvcounts[1]"},
      {"null recvbuf", [&] { return collx_alltoallv(send, counts, nullptr, nullptr, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvbuf is NULL"},
      {"null sendbuf", [&] { return collx_alltoallv(nullptr, counts, nullptr, recv, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "sendbuf is NULL"},
      {"in place", [&] { return collx_alltoallv(send, counts, nullptr, send + 2, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "no in-place form"},
      {"unknown datatype", [&] { return collx_alltoallv(send, counts, nullptr, recv, counts, nullptr, static_cast<collx_datatype_t>(77), comm, nullptr); }, "datatype"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.call(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(comm)).find(c.must_mention), std::string::npos) << collx_last_error(comm);
  }
  world.run([&](int rank, collx_comm_t each) {
    const int32_t mine[2] = {10 * rank, 10 * rank + 1};
    int32_t got[2] = {-1, -1};
    const size_t ones[2] = {1, 1};
    ASSERT_EQ(collx_alltoallv(mine, ones, nullptr, got, ones, nullptr, COLLX_INT32, each, nullptr), COLLX_OK)
        << collx_last_error(each);
    EXPECT_EQ(got[0], rank);
    EXPECT_EQ(got[1], 10 + rank);
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
