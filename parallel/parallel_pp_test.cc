// Pipeline parallelism: the 1F1B schedule's shape, and a toy pipeline run through it with
// batched neighbour exchanges on thread ranks, equal to running the stages sequentially.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::PerRank;
using collx::testing::ThreadRanks;

std::vector<collx_pp_action_t> schedule(int p, int r, int m) {
  size_t n = 0;
  EXPECT_EQ(collx_pp_schedule_1f1b(p, r, m, nullptr, 0, &n), COLLX_OK);
  std::vector<collx_pp_action_t> a(n);
  EXPECT_EQ(collx_pp_schedule_1f1b(p, r, m, a.data(), a.size(), &n), COLLX_OK);
  return a;
}

TEST(ParallelPp, OneForwardOneBackwardShape) {
  for (int p : {1, 2, 4})
    for (int m : {1, 3, 8})
      for (int r = 0; r < p; ++r) {
        std::vector<collx_pp_action_t> a = schedule(p, r, m);
        ASSERT_EQ(a.size(), static_cast<size_t>(2 * m));
        const int warmup = std::min(p - r - 1, m);
        int fwd = 0, bwd = 0, lasts = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          if (static_cast<int>(i) < warmup) {
            EXPECT_EQ(a[i].kind, COLLX_PP_FORWARD);
          }
          if (a[i].kind == COLLX_PP_FORWARD) {
            EXPECT_EQ(a[i].microbatch, fwd++);
          } else {
            EXPECT_EQ(a[i].microbatch, bwd++);
            EXPECT_LT(a[i].microbatch, fwd) << "backward before its forward";
          }
          // In flight (forwarded, not yet backwarded) never exceeds the warmup + 1.
          EXPECT_LE(fwd - bwd, warmup + 1);
          lasts += a[i].last_backward;
        }
        EXPECT_EQ(lasts, 1);
        EXPECT_TRUE(a.back().kind == COLLX_PP_BACKWARD && a.back().last_backward);
      }
  size_t n = 0;
  EXPECT_EQ(collx_pp_schedule_1f1b(2, 2, 4, nullptr, 0, &n), COLLX_ERR_INVALID_ARG);
}

constexpr size_t kLen = 5;

float input(int mb, size_t j) { return static_cast<float>(mb) + 0.5f * static_cast<float>(j); }
float weight(int stage) { return 0.5f + 0.25f * static_cast<float>(stage); }

// Each stage scales by its weight; the loss is the sum of the last output. Returns dw of
// every stage, accumulated in micro-batch order, computed without a pipeline.
std::vector<float> sequential(int p, int m) {
  std::vector<float> dw(static_cast<size_t>(p), 0.0f);
  for (int mb = 0; mb < m; ++mb) {
    std::vector<std::vector<float>> x(static_cast<size_t>(p) + 1, std::vector<float>(kLen));
    for (size_t j = 0; j < kLen; ++j) x[0][j] = input(mb, j);
    for (int s = 0; s < p; ++s)
      for (size_t j = 0; j < kLen; ++j) x[s + 1][j] = weight(s) * x[s][j];
    std::vector<float> g(kLen, 1.0f);
    for (int s = p - 1; s >= 0; --s) {
      for (size_t j = 0; j < kLen; ++j) dw[s] += x[s][j] * g[j];
      for (size_t j = 0; j < kLen; ++j) g[j] *= weight(s);
    }
  }
  return dw;
}

float run_stage(collx_comm_t comm, int p, int r, int m) {
  const bool first = r == 0, last = r == p - 1;
  std::vector<std::vector<float>> x_in(m, std::vector<float>(kLen)), y(m, std::vector<float>(kLen)),
      g_out(m, std::vector<float>(kLen)), g_in(m, std::vector<float>(kLen));
  float dw = 0;
  const float* pending_next = nullptr;
  const float* pending_prev = nullptr;
  std::vector<collx_pp_action_t> acts = schedule(p, r, m);
  for (size_t k = 0; k <= acts.size(); ++k) {
    const collx_pp_action_t* a = k < acts.size() ? &acts[k] : nullptr;
    float* recv_prev = a && a->kind == COLLX_PP_FORWARD && !first ? x_in[a->microbatch].data() : nullptr;
    float* recv_next = a && a->kind == COLLX_PP_BACKWARD && !last ? g_out[a->microbatch].data() : nullptr;
    EXPECT_EQ(collx_pp_exchange(pending_next, recv_prev, pending_prev, recv_next, kLen, COLLX_FLOAT32, 0, comm, 20000),
              COLLX_OK)
        << collx_last_error(nullptr);
    pending_next = pending_prev = nullptr;
    if (!a) break;
    const int mb = a->microbatch;
    if (a->kind == COLLX_PP_FORWARD) {
      for (size_t j = 0; j < kLen; ++j) {
        if (first) x_in[mb][j] = input(mb, j);
        y[mb][j] = weight(r) * x_in[mb][j];
      }
      if (!last) pending_next = y[mb].data();
    } else {
      for (size_t j = 0; j < kLen; ++j) {
        if (last) g_out[mb][j] = 1.0f;
        dw += x_in[mb][j] * g_out[mb][j];
        g_in[mb][j] = weight(r) * g_out[mb][j];
      }
      if (!first) pending_prev = g_in[mb].data();
    }
  }
  return dw;
}

TEST(ParallelPp, PipelineEqualsSequentialStages) {
  for (int p : {2, 3, 4}) {
    for (int m : {1, 4}) {
      ThreadRanks ranks(p, 20000);
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      PerRank<float> dw(p);
      ranks.run([&](int rank, collx_comm_t comm) { dw.set(rank, run_stage(comm, p, rank, m)); });
      std::vector<float> want = sequential(p, m);
      for (int r = 0; r < p; ++r) EXPECT_EQ(dw[r], want[r]) << "pp " << p << " m " << m << " stage " << r;
    }
  }
}

TEST(ParallelPp, ExchangeRejectsMissingNeighbours) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    float buf[2] = {0, 0};
    if (rank == 0) {
      EXPECT_EQ(collx_pp_exchange(nullptr, buf, nullptr, nullptr, 2, COLLX_FLOAT32, 0, comm, 1000), COLLX_ERR_INVALID_ARG);
      EXPECT_NE(std::string(collx_last_error(nullptr)).find("no previous stage"), std::string::npos);
    } else {
      EXPECT_EQ(collx_pp_exchange(buf, nullptr, nullptr, nullptr, 2, COLLX_FLOAT32, 0, comm, 1000), COLLX_ERR_INVALID_ARG);
      EXPECT_NE(std::string(collx_last_error(nullptr)).find("no next stage"), std::string::npos);
    }
  });
}

// Stage 1 never sends: stage 0's exchange times out naming the receive, and releases its
// handle (the receive goes on without it), so nothing keeps the communicator alive once the
// ranks destroy it.
TEST(ParallelPp, ExchangeTimeoutLeavesNoHandleHoldingTheCommunicator) {
  std::weak_ptr<collx::Communicator> stage0;
  std::vector<float> recv(2, 0.0f);  // outlives the communicators: the receive stays posted
  {
    ThreadRanks ranks(2, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    stage0 = collx::testing::watch_communicator(ranks.comm(0));
    ranks.run([&](int rank, collx_comm_t comm) {
      if (rank != 0) return;
      EXPECT_EQ(collx_pp_exchange(nullptr, nullptr, nullptr, recv.data(), 2, COLLX_FLOAT32, 0, comm, 200),
                COLLX_ERR_TIMEOUT);
      EXPECT_NE(std::string(collx_last_error(nullptr)).find("receive from the next stage"), std::string::npos)
          << collx_last_error(nullptr);
    });
  }
  EXPECT_TRUE(stage0.expired()) << "a request of the timed-out exchange still holds stage 0's communicator";
}

}  // namespace

namespace {

// Tied embeddings: {first, last} stage of each PP group, on pp 2 x dp 2 and pp 4.
TEST(ParallelPp, StageCommunicatorJoinsChosenStages) {
  for (int pp : {2, 4}) {
    ThreadRanks ranks(4, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    PerRank<std::vector<int32_t>> members(4);
    ranks.run([&](int rank, collx_comm_t comm) {
      collx_grid_config_t gc;
      collx_grid_config_init(&gc, sizeof gc);
      gc.pp = pp;
      collx_grid_t grid = nullptr;
      ASSERT_EQ(collx_grid_create(comm, &gc, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
      const int32_t ends[2] = {0, pp - 1}, bad[2] = {0, 0};
      collx_comm_t tied = nullptr;
      EXPECT_EQ(collx_grid_stage_comm(grid, bad, 2, &tied), COLLX_ERR_INVALID_ARG);
      EXPECT_NE(std::string(collx_grid_last_error(grid)).find("listed twice"), std::string::npos);
      ASSERT_EQ(collx_grid_stage_comm(grid, ends, 2, &tied), COLLX_OK) << collx_grid_last_error(grid);
      std::vector<int32_t> world_ranks;
      if (tied) {
        int32_t n = 0;
        collx_comm_size(tied, &n);
        world_ranks.resize(static_cast<size_t>(n));
        int32_t me = rank;
        collx_allgather(&me, world_ranks.data(), 1, COLLX_INT32, tied, nullptr);
        collx_comm_destroy(tied);
      }
      members.set(rank, world_ranks);
      collx_grid_destroy(grid);
    });
    // Default order: pp is the slowest axis, so stage s of group g is rank g + s * (4 / pp).
    const int groups = 4 / pp;
    for (int r = 0; r < 4; ++r) {
      const int stage = r / groups, group = r % groups;
      if (stage == 0 || stage == pp - 1) {
        EXPECT_EQ(members[r], (std::vector<int32_t>{group, group + (pp - 1) * groups})) << "pp " << pp << " rank " << r;
      } else {
        EXPECT_TRUE(members[r].empty()) << "rank " << r << " is not a first or last stage";
      }
    }
  }
}

}  // namespace
