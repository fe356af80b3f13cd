// Helpers of the v-collective tests: block layouts (packed, or placed in reverse rank order
// with gaps), buffers poisoned so gaps that must stay untouched can be checked, a call that
// runs blocking or nonblocking alike, the sweep loop over cases, and a run of a call that
// must fail on some ranks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "tests/fast/sweep.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {

constexpr unsigned char kVPoison = 0xAB;

enum class VLayout { kPacked, kReversedWithGaps, kInPlace };

// What every case of a v-collective test has besides its layout.
struct VCaseBase {
  collx_datatype_t datatype = COLLX_INT32;
  bool nonblocking = false;
  std::string name;
};

inline const char* vlayout_name(VLayout l) {
  return l == VLayout::kPacked ? "packed" : l == VLayout::kReversedWithGaps ? "gaps" : "in_place";
}

// Where each block goes: packed in rank order, or in reverse rank order with a gap of 2
// elements before and between blocks.
inline std::vector<size_t> vlayout_displs(const std::vector<size_t>& counts, VLayout layout) {
  const size_t n = counts.size();
  std::vector<size_t> displs(n, 0);
  if (layout == VLayout::kReversedWithGaps) {
    size_t at = 2;
    for (size_t r = n; r-- > 0;) {
      displs[r] = at;
      at += counts[r] + 2;
    }
    return displs;
  }
  for (size_t r = 1; r < n; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  return displs;
}

// What to pass as displs: NULL (packed) for the packed layout, else the array.
inline const size_t* vlayout_arg(const std::vector<size_t>& displs, VLayout layout) {
  return layout == VLayout::kPacked ? nullptr : displs.data();
}

inline size_t vlayout_extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t extent = 0;
  for (size_t r = 0; r < counts.size(); ++r) extent = std::max(extent, displs[r] + counts[r]);
  return extent;
}

// Elements of `buf` (extent elements of `elem` bytes) that no block covers but were written.
inline size_t vlayout_gaps_written(const std::vector<unsigned char>& buf, const std::vector<size_t>& counts,
                                   const std::vector<size_t>& displs, size_t elem) {
  const size_t extent = vlayout_extent(counts, displs);
  std::vector<bool> covered(extent, false);
  for (size_t r = 0; r < counts.size(); ++r) {
    for (size_t i = 0; i < counts[r]; ++i) covered[displs[r] + i] = true;
  }
  size_t written = 0;
  for (size_t e = 0; e < extent; ++e) {
    if (covered[e]) continue;
    for (size_t b = 0; b < elem; ++b) {
      if (buf[e * elem + b] != kVPoison) {
        ++written;
        break;
      }
    }
  }
  return written;
}

// Runs `start` (a blocking call when request is NULL, else its nonblocking form) and waits.
inline collx_status_t run_maybe_nonblocking(bool nonblocking,
                                            const std::function<collx_status_t(collx_request_t*)>& start) {
  if (!nonblocking) return start(nullptr);
  collx_request_t req = nullptr;
  collx_status_t rc = start(&req);
  if (rc != COLLX_OK) return rc;
  rc = collx_wait(req, -1);
  collx_request_free(req);
  return rc;
}

// Runs every case (each returns its number of wrong elements), stopping after 5 failing ones.
template <class Case, class Run>
void run_v_cases(ThreadRanks& world, const std::vector<Case>& cases, Run run) {
  int failing = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + " on " + std::to_string(world.size()) + " ranks");
    if (run(world, c) != 0 && ++failing >= 5) FAIL() << "stopping after 5 failing cases";
  }
}

// A test `Suite.Name` run on every world of sweep_worlds(): `cases` (an expression that may
// use `world`) through `run` (see run_v_cases).
#define COLLX_V_SWEEP_TEST(Suite, Name, cases, run)                                  \
  class Suite : public ::testing::TestWithParam<SweepWorld> {};                      \
  TEST_P(Suite, Name) {                                                              \
    ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);            \
    ASSERT_TRUE(world.ok()) << world.error();                                        \
    run_v_cases(world, cases, run);                                                  \
  }                                                                                  \
  INSTANTIATE_TEST_SUITE_P(Worlds, Suite, ::testing::ValuesIn(sweep_worlds()), SweepWorldName())

// Two ranks and one float buffer for bad-input tests: calls are made on rank 0 alone (they
// must fail before any message), then both ranks check the communicator still works.
struct BadInputWorld {
  ThreadRanks world{2};
  std::vector<float> buf = std::vector<float>(64, 1.0f);
  collx_comm_t comm() const { return world.comm(0); }
  float* low() { return buf.data(); }        // 32 elements
  float* high() { return buf.data() + 32; }  // 32 elements, disjoint from low()
};

// A call with bad arguments: it must return COLLX_ERR_INVALID_ARG and the communicator's
// last error must mention `must_mention`.
struct BadCall {
  const char* what;
  std::function<collx_status_t()> call;
  const char* must_mention;
};
inline void expect_rejected(collx_comm_t comm, const std::vector<BadCall>& calls) {
  for (const BadCall& c : calls) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.call(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(comm)).find(c.must_mention), std::string::npos) << collx_last_error(comm);
  }
}

// Every rank's status and last error after `call`, on a fresh world of `size` ranks (20 s
// timeout); fails the test if that took 5 s or more (a mismatch must not wait for the timeout).
struct RankOutcomes {
  std::vector<collx_status_t> rc;
  std::vector<std::string> msg;
};
inline RankOutcomes run_expecting_quick_failure(int size, const std::function<collx_status_t(int, collx_comm_t)>& call) {
  RankOutcomes out;
  ThreadRanks world(size, /*timeout_ms=*/20000);
  EXPECT_TRUE(world.ok()) << world.error();
  if (!world.ok()) return out;
  out.rc.assign(static_cast<size_t>(size), COLLX_OK);
  out.msg.assign(static_cast<size_t>(size), "");
  const auto start = std::chrono::steady_clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    out.rc[static_cast<size_t>(rank)] = call(rank, comm);
    out.msg[static_cast<size_t>(rank)] = collx_last_error(comm);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "a mismatch must not wait for the timeout";
  return out;
}

// True when some rank failed with COLLX_ERR_MISMATCH and a message holding both words;
// every rank must have failed with MISMATCH or REMOTE.
inline bool some_rank_named_mismatch(const RankOutcomes& o, const std::string& coll, const std::string& detail) {
  bool named = false;
  for (size_t r = 0; r < o.rc.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.msg[r]);
    EXPECT_TRUE(o.rc[r] == COLLX_ERR_MISMATCH || o.rc[r] == COLLX_ERR_REMOTE) << collx_status_name(o.rc[r]);
    if (o.rc[r] == COLLX_ERR_MISMATCH && o.msg[r].find(coll) != std::string::npos &&
        o.msg[r].find(detail) != std::string::npos) {
      named = true;
    }
  }
  return named;
}

}  // namespace testing
}  // namespace collx
