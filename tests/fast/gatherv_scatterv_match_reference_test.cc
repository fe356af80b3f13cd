// Gatherv and scatterv with uneven blocks (empty ones included), packed, placed with gaps in
// reverse rank order, or in place on the root, blocking and nonblocking, with the root first,
// last or in the middle, on every world size and transport: the root's blocks (gatherv) or
// every rank's block (scatterv) equal the reference, and gaps stay untouched. The ranks
// other than the root pass NULL for the arrays and the buffer they do not use. A rank whose
// count disagrees with the root's gets a mismatch; bad arrays are rejected naming the fault.
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

struct RootedCase {
  bool gather = true;
  std::vector<size_t> counts;
  VLayout layout = VLayout::kPacked;
  int root = 0;
  collx_datatype_t datatype = COLLX_INT32;
  bool nonblocking = false;
  std::string name;
};

collx_status_t call(const RootedCase& c, const void* send, void* recv, size_t own, const size_t* displs,
                    collx_comm_t comm, bool is_root) {
  const size_t* counts = is_root ? c.counts.data() : nullptr;
  if (!is_root) displs = nullptr;
  return run_maybe_nonblocking(c.nonblocking, [&](collx_request_t* req) {
    if (c.gather) {
      return req ? collx_igatherv(send, own, recv, counts, displs, c.datatype, c.root, comm, nullptr, req)
                 : collx_gatherv(send, own, recv, counts, displs, c.datatype, c.root, comm, nullptr);
    }
    return req ? collx_iscatterv(send, counts, displs, recv, own, c.datatype, c.root, comm, nullptr, req)
               : collx_scatterv(send, counts, displs, recv, own, c.datatype, c.root, comm, nullptr);
  });
}

// Block r of the root's buffer holds input_value(r, i) (gatherv: sent by rank r; scatterv:
// put there by the root for rank r).
size_t run_rooted(ThreadRanks& world, const RootedCase& c) {
  const size_t elem = collx_datatype_size(c.datatype);
  const std::vector<size_t> displs = vlayout_displs(c.counts, c.layout);
  const size_t extent = vlayout_extent(c.counts, displs);
  std::atomic<size_t> wrong_total{0};
  world.run([&](int rank, collx_comm_t comm) {
    const size_t me = static_cast<size_t>(rank);
    const bool is_root = rank == c.root;
    const size_t own = c.counts[me];
    std::vector<unsigned char> whole(is_root ? extent * elem + 16 : 0, kVPoison);
    std::vector<unsigned char> block(own * elem + 16, kVPoison);
    void* whole_ptr = is_root ? whole.data() : nullptr;
    void* own_ptr = block.data();
    if (is_root && c.layout == VLayout::kInPlace) own_ptr = whole.data() + displs[me] * elem;
    if (c.gather) {
      fill_input(own_ptr, own, 0, rank, COLLX_SUM, c.datatype);
    } else if (is_root) {
      for (size_t q = 0; q < c.counts.size(); ++q) {
        fill_input(whole.data() + displs[q] * elem, c.counts[q], 0, static_cast<int>(q), COLLX_SUM, c.datatype);
      }
    }
    const collx_status_t rc = c.gather ? call(c, own_ptr, whole_ptr, own, vlayout_arg(displs, c.layout), comm, is_root)
                                       : call(c, whole_ptr, own_ptr, own, vlayout_arg(displs, c.layout), comm, is_root);
    if (rc != COLLX_OK) {
      ADD_FAILURE() << c.name << " rank " << rank << ": " << collx_status_name(rc) << ": " << collx_last_error(comm);
      wrong_total += 1;
      return;
    }
    size_t wrong = 0;
    auto check = [&](const void* buf, size_t at, int from, size_t i) {
      const double want = input_value(from, i, COLLX_SUM, c.datatype);
      if (!values_match(want, load_value(buf, at, c.datatype), c.datatype, COLLX_SUM) && wrong++ == 0) {
        ADD_FAILURE() << c.name << " rank " << rank << ": block of rank " << from << " element " << i;
      }
    };
    if (c.gather && is_root) {
      for (size_t q = 0; q < c.counts.size(); ++q) {
        for (size_t i = 0; i < c.counts[q]; ++i) check(whole.data(), displs[q] + i, static_cast<int>(q), i);
      }
      wrong += vlayout_gaps_written(whole, c.counts, displs, elem);
    }
    if (!c.gather) {
      for (size_t i = 0; i < own; ++i) check(own_ptr, i, rank, i);
      if (is_root) wrong += vlayout_gaps_written(whole, c.counts, displs, elem);
    }
    wrong_total += wrong;
  });
  return wrong_total.load();
}

std::vector<RootedCase> cases_for(int size) {
  const size_t n = static_cast<size_t>(size);
  std::vector<size_t> uneven(n), root_empty(n), zeros(n, 0), large(n);
  for (size_t r = 0; r < n; ++r) {
    uneven[r] = (r * 5 + 3) % 7;
    root_empty[r] = r == 0 ? 0 : 300 + r;
    large[r] = (size_t{1} << 15) * (1 + r % 3) + r;
  }
  std::vector<RootedCase> out;
  for (bool gather : {true, false}) {
    const std::string kind = gather ? "gatherv" : "scatterv";
    for (int root : {0, size / 2, size - 1}) {
      for (VLayout layout : {VLayout::kPacked, VLayout::kReversedWithGaps, VLayout::kInPlace}) {
        for (collx_datatype_t dt : {COLLX_UINT8, COLLX_BFLOAT16, COLLX_FLOAT64}) {
          RootedCase c;
          c.gather = gather;
          c.counts = root == 0 && dt == COLLX_FLOAT64 ? root_empty : uneven;
          c.layout = layout;
          c.root = root;
          c.datatype = dt;
          c.nonblocking = layout == VLayout::kReversedWithGaps && dt == COLLX_BFLOAT16;
          c.name = kind + "/root" + std::to_string(root) + "/" + vlayout_name(layout) + "/" + collx_datatype_name(dt) +
                   (c.nonblocking ? "/nonblocking" : "");
          out.push_back(c);
        }
      }
    }
    RootedCase empty;
    empty.gather = gather;
    empty.counts = zeros;
    empty.root = size - 1;
    empty.name = kind + "/all_empty";
    out.push_back(empty);
    RootedCase big;
    big.gather = gather;
    big.counts = large;
    big.layout = VLayout::kReversedWithGaps;
    big.root = size / 2;
    big.datatype = COLLX_FLOAT32;
    big.name = kind + "/large";
    out.push_back(big);
  }
  return out;
}

class GathervScattervSweep : public ::testing::TestWithParam<SweepWorld> {};

TEST_P(GathervScattervSweep, UnevenBlocksMatchReferenceAndGapsStayUntouched) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  int failing = 0;
  for (const RootedCase& c : cases_for(world.size())) {
    SCOPED_TRACE(c.name + " on " + std::to_string(world.size()) + " ranks");
    if (run_rooted(world, c) != 0 && ++failing >= 5) FAIL() << "stopping after 5 failing cases";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GathervScattervSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

// Rank 1 passes 3 elements where the root's array says 2: the side that receives notices.
void expect_count_mismatch(bool gather) {
  ThreadRanks world(3, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<collx_status_t> rc(3);
  std::vector<std::string> msg(3);
  const auto start = std::chrono::steady_clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    const size_t counts[3] = {2, 2, 2};
    const size_t own = rank == 1 ? 3 : 2;
    std::vector<int32_t> whole(8, 7), block(4, 7);
    rc[rank] = gather ? collx_gatherv(block.data(), own, whole.data(), counts, nullptr, COLLX_INT32, 0, comm, nullptr)
                      : collx_scatterv(whole.data(), counts, nullptr, block.data(), own, COLLX_INT32, 0, comm, nullptr);
    msg[rank] = collx_last_error(comm);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "a mismatch must not wait for the timeout";
  const int receiver = gather ? 0 : 1;
  EXPECT_EQ(rc[receiver], COLLX_ERR_MISMATCH) << msg[receiver];
  EXPECT_NE(msg[receiver].find(gather ? "gatherv" : "scatterv"), std::string::npos) << msg[receiver];
}

TEST(GathervMismatch, SendcountThatDisagreesWithTheRootFailsOnTheRoot) { expect_count_mismatch(true); }
TEST(ScattervMismatch, RecvcountThatDisagreesWithTheRootFailsOnThatRank) { expect_count_mismatch(false); }

TEST(GathervScattervBadInput, EachBadArgumentIsNamedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);  // the root in every case
  std::vector<float> buf(64, 1.0f);
  float* whole = buf.data();
  float* own = buf.data() + 32;
  const size_t counts[2] = {4, 4}, overlapping[2] = {0, 2};
  struct Case {
    const char* what;
    std::function<collx_status_t()> call;
    const char* must_mention;
  };
  const std::vector<Case> bad = {
      {"gatherv null recvcounts on the root", [&] { return collx_gatherv(own, 4, whole, nullptr, nullptr, COLLX_FLOAT32, 0, comm, nullptr); }, "recvcounts is NULL"},
      {"gatherv sendcount differs", [&] { return collx_gatherv(own, 3, whole, counts, nullptr, COLLX_FLOAT32, 0, comm, nullptr); }, "recvcounts[0]"},
      {"gatherv overlapping blocks", [&] { return collx_gatherv(own, 4, whole, counts, overlapping, COLLX_FLOAT32, 0, comm, nullptr); }, "overlap"},
      {"gatherv null recvbuf", [&] { return collx_gatherv(own, 4, nullptr, counts, nullptr, COLLX_FLOAT32, 0, comm, nullptr); }, "recvbuf is NULL"},
      {"gatherv bad in place", [&] { return collx_gatherv(whole + 1, 4, whole, counts, nullptr, COLLX_FLOAT32, 0, comm, nullptr); }, "in place"},
      {"gatherv root out of range", [&] { return collx_gatherv(own, 4, whole, counts, nullptr, COLLX_FLOAT32, 2, comm, nullptr); }, "root 2"},
      {"scatterv null sendcounts on the root", [&] { return collx_scatterv(whole, nullptr, nullptr, own, 4, COLLX_FLOAT32, 0, comm, nullptr); }, "sendcounts is NULL"},
      {"scatterv recvcount differs", [&] { return collx_scatterv(whole, counts, nullptr, own, 5, COLLX_FLOAT32, 0, comm, nullptr); }, "sendcounts[0]"},
      {"scatterv null sendbuf", [&] { return collx_scatterv(nullptr, counts, nullptr, own, 4, COLLX_FLOAT32, 0, comm, nullptr); }, "sendbuf is NULL"},
      {"scatterv bad in place", [&] { return collx_scatterv(whole, counts, nullptr, whole + 2, 4, COLLX_FLOAT32, 0, comm, nullptr); }, "in place"},
      {"scatterv unknown datatype", [&] { return collx_scatterv(whole, counts, nullptr, own, 4, static_cast<collx_datatype_t>(77), 0, comm, nullptr); }, "datatype"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.call(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(comm)).find(c.must_mention), std::string::npos) << collx_last_error(comm);
  }
  world.run([&](int rank, collx_comm_t each) {
    const int32_t mine[2] = {rank + 1, rank + 2};
    int32_t all[3] = {-1, -1, -1};
    const size_t counts_used[2] = {1, 2};
    ASSERT_EQ(collx_gatherv(mine, counts_used[rank], rank == 0 ? all : nullptr, rank == 0 ? counts_used : nullptr,
                            nullptr, COLLX_INT32, 0, each, nullptr),
              COLLX_OK)
        << collx_last_error(each);
    if (rank == 0) {
      EXPECT_EQ(all[0], 1);
      EXPECT_EQ(all[1], 2);
      EXPECT_EQ(all[2], 3);
    }
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
