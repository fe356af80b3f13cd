// Reduce-scatterv with uneven blocks (empty ones included), every reduction op and datatype,
// in place and out of place, blocking and nonblocking, on every world size and transport:
// each rank's block equals the double-precision reference of its part of the vector and
// nothing past it is written. Ranks passing different recvcounts get a mismatch, and bad
// arrays are rejected naming what is wrong.
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

constexpr double kPremul = 2.0;

struct RsvCase {
  std::vector<size_t> counts;
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  bool in_place = false;
  bool nonblocking = false;
  std::string name;
};

size_t run_reduce_scatterv(ThreadRanks& world, const RsvCase& c) {
  const size_t n = static_cast<size_t>(world.size());
  const size_t elem = collx_datatype_size(c.datatype);
  const std::vector<size_t> offsets = vlayout_displs(c.counts, VLayout::kPacked);
  const size_t total = vlayout_extent(c.counts, offsets);
  std::vector<double> expected(total);
  for (size_t i = 0; i < total; ++i) expected[i] = reference_reduce(c.op, c.datatype, static_cast<int>(n), i, kPremul);
  std::atomic<size_t> wrong_total{0};
  world.run([&](int rank, collx_comm_t comm) {
    const size_t me = static_cast<size_t>(rank);
    // One buffer of the whole input plus room behind it: recvbuf is either its block `rank`
    // (in place) or the room behind, followed by a poisoned tail that must stay untouched.
    std::vector<unsigned char> buf((total + c.counts[me] + 8) * elem, kVPoison);
    unsigned char* send = buf.data();
    unsigned char* recv = c.in_place ? send + offsets[me] * elem : send + total * elem;
    fill_input(send, total, 0, rank, c.op, c.datatype);
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof(opts));
    opts.premul_scalar = kPremul;
    const collx_status_t rc = run_maybe_nonblocking(c.nonblocking, [&](collx_request_t* req) {
      return req ? collx_ireduce_scatterv(send, recv, c.counts.data(), c.datatype, c.op, comm, &opts, req)
                 : collx_reduce_scatterv(send, recv, c.counts.data(), c.datatype, c.op, comm, &opts);
    });
    if (rc != COLLX_OK) {
      ADD_FAILURE() << c.name << " rank " << rank << ": " << collx_status_name(rc) << ": " << collx_last_error(comm);
      wrong_total += 1;
      return;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < c.counts[me]; ++i) {
      const double got = load_value(recv, i, c.datatype);
      if (!values_match(expected[offsets[me] + i], got, c.datatype, c.op)) {
        if (wrong++ == 0) {
          ADD_FAILURE() << c.name << " rank " << rank << " element " << i << ": expected "
                        << expected[offsets[me] + i] << ", got " << got;
        }
      }
    }
    if (!c.in_place) {
      for (size_t b = (total + c.counts[me]) * elem; b < buf.size(); ++b) {
        if (buf[b] != kVPoison) {
          if (wrong++ == 0) ADD_FAILURE() << c.name << " rank " << rank << ": byte past recvbuf written";
          break;
        }
      }
    }
    wrong_total += wrong;
  });
  return wrong_total.load();
}

std::vector<RsvCase> cases_for(int size) {
  const size_t n = static_cast<size_t>(size);
  std::vector<size_t> uneven(n), first_empty(n), large(n);
  for (size_t r = 0; r < n; ++r) {
    uneven[r] = (r * 5 + 3) % 7;  // 3 1 6 4 2 0 5 3
    first_empty[r] = r == 0 ? 0 : 200 + 3 * r;
    large[r] = (size_t{1} << 15) * (1 + r % 3) + r;
  }
  std::vector<RsvCase> out;
  for (collx_datatype_t dt : sweep_datatypes()) {
    for (collx_op_t op : sweep_ops()) {
      for (int variant = 0; variant < 2; ++variant) {
        RsvCase c;
        c.counts = variant == 0 ? uneven : first_empty;
        c.datatype = dt;
        c.op = op;
        c.in_place = variant == 1;
        c.nonblocking = variant == 1 && op == COLLX_SUM;
        c.name = std::string(variant == 0 ? "uneven" : "first_empty") + "/" + collx_datatype_name(dt) + "/" +
                 collx_op_name(op) + (c.in_place ? "/in_place" : "") + (c.nonblocking ? "/nonblocking" : "");
        out.push_back(c);
      }
    }
  }
  RsvCase zeros;
  zeros.counts.assign(n, 0);
  zeros.name = "all_empty";
  out.push_back(zeros);
  for (collx_op_t op : {COLLX_SUM, COLLX_AVG}) {
    RsvCase big;
    big.counts = large;
    big.datatype = op == COLLX_SUM ? COLLX_FLOAT32 : COLLX_FLOAT64;
    big.op = op;
    big.name = std::string("large/") + collx_datatype_name(big.datatype) + "/" + collx_op_name(op);
    out.push_back(big);
  }
  return out;
}

class ReduceScattervSweep : public ::testing::TestWithParam<SweepWorld> {};

TEST_P(ReduceScattervSweep, UnevenBlocksMatchReferenceForEveryOpAndDatatype) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  int failing = 0;
  for (const RsvCase& c : cases_for(world.size())) {
    SCOPED_TRACE(c.name + " on " + std::to_string(world.size()) + " ranks");
    if (run_reduce_scatterv(world, c) != 0 && ++failing >= 5) FAIL() << "stopping after 5 failing cases";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ReduceScattervSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

TEST(ReduceScattervMismatch, DifferentRecvcountsFailInsteadOfReducingWrongBlocks) {
  ThreadRanks world(3, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<collx_status_t> rc(3);
  std::vector<std::string> msg(3);
  const auto start = std::chrono::steady_clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    // Same total, but rank 2 splits it differently.
    std::vector<size_t> counts = {4, 2, 3};
    if (rank == 2) counts = {3, 3, 3};
    std::vector<int32_t> send(9, rank), recv(8, -1);
    rc[rank] = collx_reduce_scatterv(send.data(), recv.data(), counts.data(), COLLX_INT32, COLLX_SUM, comm, nullptr);
    msg[rank] = collx_last_error(comm);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "a mismatch must not wait for the timeout";
  bool someone_named_it = false;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + msg[r]);
    EXPECT_TRUE(rc[r] == COLLX_ERR_MISMATCH || rc[r] == COLLX_ERR_REMOTE) << collx_status_name(rc[r]);
    if (rc[r] == COLLX_ERR_MISMATCH && msg[r].find("reduce_scatterv") != std::string::npos &&
        msg[r].find("counts hash") != std::string::npos) {
      someone_named_it = true;
    }
  }
  EXPECT_TRUE(someone_named_it);
}

TEST(ReduceScattervBadInput, EachBadArgumentIsNamedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(64, 1.0f);
  float* send = buf.data();
  float* recv = buf.data() + 32;
  const size_t counts[2] = {4, 4}, huge[2] = {4, SIZE_MAX - 1};
  struct Case {
    const char* what;
    std::function<collx_status_t()> call;
    const char* must_mention;
  };
  const std::vector<Case> bad = {
      {"null recvcounts", [&] { return collx_reduce_scatterv(send, recv, nullptr, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "recvcounts is NULL"},
      {"block past size_t", [&] { return collx_reduce_scatterv(send, recv, huge, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "recvcounts[1]"},
      {"null sendbuf", [&] { return collx_reduce_scatterv(nullptr, recv, counts, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "sendbuf is NULL"},
      {"null recvbuf", [&] { return collx_reduce_scatterv(send, nullptr, counts, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "recvbuf is NULL"},
      {"bad in place", [&] { return collx_reduce_scatterv(send, send + 1, counts, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "in place"},
      {"unknown op", [&] { return collx_reduce_scatterv(send, recv, counts, COLLX_FLOAT32, static_cast<collx_op_t>(42), comm, nullptr); }, "op"},
      {"unknown datatype", [&] { return collx_reduce_scatterv(send, recv, counts, static_cast<collx_datatype_t>(77), COLLX_SUM, comm, nullptr); }, "datatype"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.call(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(comm)).find(c.must_mention), std::string::npos) << collx_last_error(comm);
  }
  world.run([&](int rank, collx_comm_t each) {
    const int32_t mine[3] = {rank + 1, 10 * (rank + 1), 100};
    int32_t got[2] = {-1, -1};
    const size_t counts_used[2] = {1, 2};
    ASSERT_EQ(collx_reduce_scatterv(mine, got, counts_used, COLLX_INT32, COLLX_SUM, each, nullptr), COLLX_OK)
        << collx_last_error(each);
    if (rank == 0) {
      EXPECT_EQ(got[0], 3);
    } else {
      EXPECT_EQ(got[0], 30);
      EXPECT_EQ(got[1], 200);
    }
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
