// Context parallelism: ring attention over the K/V ring exchange equals single-process
// attention; the next block travels while the caller computes (seen from the request state);
// an early finish still passes the blocks on; a silent neighbour gives a timeout naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::PerRank;
using collx::testing::Signal;
using collx::testing::ThreadRanks;

constexpr int kRows = 3;  // sequence positions per rank
constexpr int kDim = 4;   // head dimension of Q and K
constexpr int kDv = 2;    // head dimension of V

// Deterministic, irregular values for position `pos` of the whole sequence.
double q_at(int pos, int k) { return std::sin(0.7 * pos + 1.3 * k + 0.1); }
double k_at(int pos, int k) { return std::cos(0.9 * pos - 0.4 * k + 0.2); }
double v_at(int pos, int k) { return 0.5 * pos - 1.5 * k + std::sin(pos * k + 0.3); }

// softmax(Q K^T / sqrt(d)) V over the whole sequence of `cp` ranks, rows of rank r.
std::vector<double> reference(int cp, int r) {
  const int n = cp * kRows;
  std::vector<double> out;
  for (int i = r * kRows; i < (r + 1) * kRows; ++i) {
    std::vector<double> s(n);
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; ++j) {
      s[j] = 0;
      for (int k = 0; k < kDim; ++k) s[j] += q_at(i, k) * k_at(j, k);
      s[j] /= std::sqrt(static_cast<double>(kDim));
      mx = std::max(mx, s[j]);
    }
    for (int j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
    for (int c = 0; c < kDv; ++c) {
      double o = 0;
      for (int j = 0; j < n; ++j) o += std::exp(s[j] - mx) / sum * v_at(j, c);
      out.push_back(o);
    }
  }
  return out;
}

// Rank `src`'s block: its K rows then its V rows, packed.
std::vector<double> kv_block(int src) {
  std::vector<double> b;
  for (int i = 0; i < kRows; ++i)
    for (int k = 0; k < kDim; ++k) b.push_back(k_at(src * kRows + i, k));
  for (int i = 0; i < kRows; ++i)
    for (int c = 0; c < kDv; ++c) b.push_back(v_at(src * kRows + i, c));
  return b;
}
constexpr size_t kBlock = kRows * (kDim + kDv);

// Online softmax: running max, running sum and unnormalised output per query row.
struct Attention {
  explicit Attention(int rank) : rank(rank), mx(kRows, -INFINITY), sum(kRows, 0), acc(kRows * kDv, 0) {}
  void merge(const double* kv) {
    const double* key = kv;
    const double* val = kv + kRows * kDim;
    for (int i = 0; i < kRows; ++i) {
      double s[kRows], block_max = -INFINITY;
      for (int j = 0; j < kRows; ++j) {
        s[j] = 0;
        for (int k = 0; k < kDim; ++k) s[j] += q_at(rank * kRows + i, k) * key[j * kDim + k];
        s[j] /= std::sqrt(static_cast<double>(kDim));
        block_max = std::max(block_max, s[j]);
      }
      const double new_max = std::max(mx[i], block_max), scale = std::exp(mx[i] - new_max);
      sum[i] *= scale;
      for (int c = 0; c < kDv; ++c) acc[i * kDv + c] *= scale;
      for (int j = 0; j < kRows; ++j) {
        const double p = std::exp(s[j] - new_max);
        sum[i] += p;
        for (int c = 0; c < kDv; ++c) acc[i * kDv + c] += p * val[j * kDv + c];
      }
      mx[i] = new_max;
    }
  }
  std::vector<double> result() const {
    std::vector<double> out(acc);
    for (int i = 0; i < kRows; ++i)
      for (int c = 0; c < kDv; ++c) out[i * kDv + c] /= sum[i];
    return out;
  }
  int rank;
  std::vector<double> mx, sum, acc;
};

// Runs fn(rank, comm) on `n` thread ranks over `transports` (0: the default choice); the
// communicators are destroyed when it returns.
void on_ranks(int n, uint32_t transports, const std::function<void(int, collx_comm_t)>& fn) {
  ThreadRanks ranks(n, 20000, transports);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run(fn);
}

struct RingRun {
  std::vector<double> out;
  std::vector<int32_t> sources;
};

TEST(ParallelCp, RingAttentionEqualsSingleProcessAttention) {
  struct Case {
    int cp;
    uint32_t transports;  // 0: the default choice
  };
  for (Case c : {Case{1, 0}, Case{2, 0}, Case{4, 0}, Case{4, COLLX_TRANSPORT_TCP}, Case{4, COLLX_TRANSPORT_SHM}}) {
    const int cp = c.cp;
    SCOPED_TRACE("cp " + std::to_string(cp) + " transports " + std::to_string(c.transports));
    PerRank<RingRun> got(cp);
    on_ranks(cp, c.transports, [&](int rank, collx_comm_t comm) {
      const std::vector<double> mine = kv_block(rank);
      std::vector<double> work(2 * kBlock);
      collx_cp_ring_t ring = nullptr;
      ASSERT_EQ(collx_cp_ring_start(comm, mine.data(), work.data(), kBlock, COLLX_FLOAT64, 7, 20000, &ring), COLLX_OK)
          << collx_last_error(nullptr);
      Attention att(rank);
      RingRun run;
      const void* kv = nullptr;
      int32_t src = -1;
      while (true) {
        ASSERT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_OK) << collx_last_error(nullptr);
        if (!kv) break;
        att.merge(static_cast<const double*>(kv));
        run.sources.push_back(src);
      }
      EXPECT_EQ(src, -1);
      EXPECT_EQ(collx_cp_ring_finish(ring), COLLX_OK) << collx_last_error(nullptr);
      run.out = att.result();
      got.set(rank, run);
    });
    for (int r = 0; r < cp; ++r) {
      std::vector<int32_t> want_sources;
      for (int i = 0; i < cp; ++i) want_sources.push_back((r - i + cp) % cp);
      EXPECT_EQ(got[r].sources, want_sources) << "cp " << cp << " rank " << r;
      const std::vector<double> want = reference(cp, r);
      ASSERT_EQ(got[r].out.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[r].out[i], want[i], 1e-6) << "cp " << cp << " rank " << r << " element " << i;
    }
  }
}

// Rank 1 starts only once rank 0 holds its own block and has seen that block 1 has not
// arrived; rank 0 then never calls next again until collx_cp_ring_test reports block 1
// complete: the receive was posted before rank 0 "computed", and finished meanwhile.
void check_in_flight(uint32_t transports) {
  Signal checked;
  on_ranks(2, transports, [&](int rank, collx_comm_t comm) {
    const std::vector<double> mine = kv_block(rank);
    std::vector<double> work(2 * kBlock);
    if (rank == 1) {
      ASSERT_TRUE(checked.wait());
    }
    collx_cp_ring_t ring = nullptr;
    ASSERT_EQ(collx_cp_ring_start(comm, mine.data(), work.data(), kBlock, COLLX_FLOAT64, 0, 20000, &ring), COLLX_OK)
        << collx_last_error(nullptr);
    const void* kv = nullptr;
    int32_t src = -1;
    ASSERT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_OK);
    EXPECT_EQ(kv, mine.data()) << "block 0 is the caller's own, not a copy";
    if (rank == 0) {
      int arrived = 1;
      ASSERT_EQ(collx_cp_ring_test(ring, &arrived), COLLX_OK) << collx_last_error(nullptr);
      EXPECT_EQ(arrived, 0) << "block 1 cannot have arrived: rank 1 has not started";
      checked.raise();
      // "Compute" on block 0 while polling only the request state.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!arrived && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ASSERT_EQ(collx_cp_ring_test(ring, &arrived), COLLX_OK) << collx_last_error(nullptr);
      }
      EXPECT_EQ(arrived, 1) << "block 1 never completed without a call to collx_cp_ring_next";
    }
    ASSERT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_OK) << collx_last_error(nullptr);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(src, 1 - rank);
    const std::vector<double> theirs = kv_block(1 - rank);
    EXPECT_EQ(std::vector<double>(static_cast<const double*>(kv), static_cast<const double*>(kv) + kBlock), theirs);
    int arrived = 0;
    EXPECT_EQ(collx_cp_ring_test(ring, &arrived), COLLX_OK);
    EXPECT_EQ(arrived, 1) << "nothing is in flight after the last block";
    EXPECT_EQ(collx_cp_ring_finish(ring), COLLX_OK) << collx_last_error(nullptr);
  });
}

TEST(ParallelCp, NextBlockIsInFlightWhileTheCallerComputes) {
  for (uint32_t transports : {0u, COLLX_TRANSPORT_TCP}) {
    SCOPED_TRACE("transports " + std::to_string(transports));
    check_in_flight(transports);
  }
}

// Rank 0 stops after its own block; the others still receive every block.
TEST(ParallelCp, EarlyFinishStillPassesTheBlocksOn) {
  PerRank<std::vector<int32_t>> sources(3);
  on_ranks(3, 0, [&](int rank, collx_comm_t comm) {
    const std::vector<double> mine = kv_block(rank);
    std::vector<double> work(2 * kBlock);
    collx_cp_ring_t ring = nullptr;
    ASSERT_EQ(collx_cp_ring_start(comm, mine.data(), work.data(), kBlock, COLLX_FLOAT64, 0, 20000, &ring), COLLX_OK);
    const void* kv = nullptr;
    int32_t src = -1;
    std::vector<int32_t> seen;
    while (collx_cp_ring_next(ring, &kv, &src) == COLLX_OK && kv) {
      EXPECT_EQ(std::vector<double>(static_cast<const double*>(kv), static_cast<const double*>(kv) + kBlock),
                kv_block(src));
      seen.push_back(src);
      if (rank == 0) break;
    }
    EXPECT_EQ(collx_cp_ring_finish(ring), COLLX_OK) << collx_last_error(nullptr);
    sources.set(rank, seen);
  });
  EXPECT_EQ(sources[0], (std::vector<int32_t>{0}));
  EXPECT_EQ(sources[1], (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(sources[2], (std::vector<int32_t>{2, 1, 0}));
}

// Rank 1 never starts: rank 0's wait for block 1 ends by the deadline, naming the transfer;
// the ring is broken afterwards and finish reports the first error.
TEST(ParallelCp, SilentNeighbourTimesOutNamingTheTransfer) {
  std::vector<double> mine = kv_block(0);
  std::vector<double> work(2 * kBlock);  // outlives the communicators: the receive stays posted
  on_ranks(2, 0, [&](int rank, collx_comm_t comm) {
    if (rank != 0) return;
    collx_cp_ring_t ring = nullptr;
    ASSERT_EQ(collx_cp_ring_start(comm, mine.data(), work.data(), kBlock, COLLX_FLOAT64, 0, 200, &ring), COLLX_OK);
    const void* kv = nullptr;
    int32_t src = -1;
    EXPECT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_OK);
    EXPECT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_ERR_TIMEOUT);
    const std::string msg = collx_last_error(nullptr);
    EXPECT_NE(msg.find("receive of rank 1's block from rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("200 ms"), std::string::npos) << msg;
    EXPECT_EQ(collx_cp_ring_next(ring, &kv, &src), COLLX_ERR_INVALID_USAGE);
    EXPECT_EQ(collx_cp_ring_finish(ring), COLLX_ERR_TIMEOUT);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("failed earlier"), std::string::npos);
  });
}

TEST(ParallelCp, StartRejectsBadArguments) {
  on_ranks(2, 0, [&](int rank, collx_comm_t comm) {
    if (rank != 0) return;
    std::vector<double> buf(3 * kBlock);
    collx_cp_ring_t ring = nullptr;
    auto expect_refused = [&](collx_status_t st, const char* words) {
      EXPECT_EQ(st, COLLX_ERR_INVALID_ARG);
      EXPECT_EQ(ring, nullptr);
      EXPECT_NE(std::string(collx_last_error(nullptr)).find(words), std::string::npos) << collx_last_error(nullptr);
    };
    expect_refused(collx_cp_ring_start(nullptr, buf.data(), buf.data() + kBlock, kBlock, COLLX_FLOAT64, 0, 100, &ring),
                   "cp_comm is NULL");
    expect_refused(collx_cp_ring_start(comm, buf.data(), buf.data() + kBlock, kBlock, COLLX_FLOAT64, -1, 100, &ring),
                   "tag -1");
    expect_refused(collx_cp_ring_start(comm, buf.data(), nullptr, kBlock, COLLX_FLOAT64, 0, 100, &ring),
                   "work (2 * count elements) is NULL");
    expect_refused(collx_cp_ring_start(comm, buf.data() + 1, buf.data(), kBlock, COLLX_FLOAT64, 0, 100, &ring),
                   "work overlaps block");
    expect_refused(collx_cp_ring_start(comm, nullptr, buf.data(), kBlock, COLLX_FLOAT64, 0, 100, &ring),
                   "block is NULL");
    expect_refused(collx_cp_ring_start(comm, nullptr, nullptr, 0, COLLX_FLOAT64, 0, 100, &ring), "count is 0");
    EXPECT_EQ(collx_cp_ring_finish(nullptr), COLLX_OK);
  });
}

}  // namespace
