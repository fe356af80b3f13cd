// ZeRO memory held per rank, read from the handle's allocation account (collx_zero_memory)
// for stages 0-3 at dp 1, 2 and 4, and stage 2 (no full gradient buffer) against stage 1:
// bit for bit with one micro-step, within the summation bound with several.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "parallel/parallel_test_util.h"
#include "parallel/zero_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::grad_value;
using collx::testing::make_layout;
using collx::testing::PerRank;
using collx::testing::ThreadRanks;
using collx::testing::ZeroModel;

const std::vector<size_t> kSizes = {1000, 3000, 2000, 4000, 500, 1500, 7, 2500, 1200, 800, 3300, 2200, 900, 1700, 2600, 1100};
constexpr size_t kBucket = 2048;

float micro_grad(int rank, size_t t, size_t j, int step, int micro) {
  return 0.1f * grad_value(rank, t, j) + 0.013f * static_cast<float>(step) - 0.021f * static_cast<float>(micro) +
         0.0007f * static_cast<float>(j % 5);
}

struct RankRun {
  collx_zero_memory_t mem{};
  size_t shard = 0;
  size_t total = 0;        // layout elements (padded buckets or tensors)
  size_t max_bucket = 0;   // FLAT: the largest padded bucket
  size_t max_tensor = 0;   // PER_TENSOR: the largest padded tensor
  size_t tensors = 0;      // PER_TENSOR: the padded tensors, summed
  std::vector<float> grad; // the shard gradient of step 0, after the last micro-step
  std::vector<collx_zero_piece_t> pieces;
  ZeroModel params;        // after the last step
};

struct Case {
  int stage = 1;
  int world = 1;
  int micro = 1;
  int comm_dtype = COLLX_FLOAT32;
  int steps = 2;
};

void layout_sizes(collx_layout_t l, RankRun* r) {
  collx_layout_total(l, &r->total);
  size_t nb = 0;
  collx_layout_num_buckets(l, &nb);
  for (size_t b = 0; b < nb; ++b) {
    size_t padded = 0;
    collx_layout_bucket(l, b, nullptr, &padded, nullptr);
    r->max_bucket = std::max(r->max_bucket, padded);
  }
  for (size_t t = 0; t < kSizes.size(); ++t) {
    size_t padded = 0;
    collx_layout_tensor_bucket(l, t, nullptr, &padded);
    r->max_tensor = std::max(r->max_tensor, padded);
    r->tensors += padded;
  }
}

std::vector<RankRun> train(const Case& k) {
  SCOPED_TRACE("stage " + std::to_string(k.stage) + " dp " + std::to_string(k.world) + " micro " +
               std::to_string(k.micro));
  ThreadRanks ranks(k.world, 20000);
  EXPECT_TRUE(ranks.ok()) << ranks.error();
  PerRank<RankRun> out(k.world);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(k.world, kSizes, kBucket, k.stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT);
    collx_zero_config_t c = collx::testing::zero_test_config(k.stage);
    c.comm_dtype = k.comm_dtype;
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    collx::testing::zero_test_load(z, kSizes);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    RankRun r;
    layout_sizes(l, &r);
    auto grad = [&](size_t t, size_t j, int s, int m) { return micro_grad(rank, t, j, s, m); };
    for (int s = 0; s < k.steps; ++s) {
      collx::testing::zero_test_grads(z, k.stage, kSizes, s, k.micro, grad);
      if (s == 0) {
        float* g = nullptr;
        collx_zero_shard(z, nullptr, &g, &r.shard);
        r.grad.assign(g, g + r.shard);
      }
      ASSERT_EQ(collx_zero_step(z, 1.0), COLLX_OK) << collx_zero_last_error(z);
      ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    }
    r.mem.size = sizeof r.mem;
    ASSERT_EQ(collx_zero_memory(z, &r.mem), COLLX_OK) << collx_zero_last_error(z);
    size_t n = 0;
    collx_zero_pieces(z, nullptr, 0, &n);
    r.pieces.resize(n);
    collx_zero_pieces(z, r.pieces.data(), n, &n);
    r.params = collx::testing::zero_test_full(z, kSizes);
    out.set(rank, r);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  std::vector<RankRun> all;
  for (int r = 0; r < k.world; ++r) all.push_back(out[r]);
  return all;
}

constexpr size_t kF = sizeof(float);

// Stages 0-3 at dp 1, 2, 4: the shard is total/dp, the optimizer state 3 shards (AdamW),
// stages 0 and 1 hold the full gradient buffer, stage 2 the shard plus at most three bucket
// slots (one filling, two in flight), stage 3 the shard plus one padded tensor at a time.
TEST(ParallelZeroMemory, GradientsHeldAreTheShardPlusBucketsFromStage2) {
  std::printf("stage dp  params   grads(peak)  optimizer  comm(peak)  total(peak)  [bytes per rank]\n");
  for (int world : {1, 2, 4}) {
    size_t stage1_grads = 0;
    for (int stage = 0; stage <= 3; ++stage) {
      Case k;
      k.stage = stage;
      k.world = world;
      k.micro = 2;
      const std::vector<RankRun> runs = train(k);
      if (::testing::Test::HasFatalFailure()) return;
      for (int rank = 0; rank < world; ++rank) {
        SCOPED_TRACE("stage " + std::to_string(stage) + " dp " + std::to_string(world) + " rank " +
                     std::to_string(rank));
        const RankRun& r = runs[static_cast<size_t>(rank)];
        const collx_zero_memory_t& m = r.mem;
        const size_t w = static_cast<size_t>(world);
        EXPECT_EQ(r.shard * (stage == 0 ? 1 : w), stage == 3 ? r.tensors : r.total) << "the shard is total/dp";
        EXPECT_EQ(m.optimizer, 3 * r.shard * kF) << "master, exp_avg, exp_avg_sq";
        EXPECT_EQ(m.total, m.params + m.grads + m.optimizer + m.comm);
        switch (stage) {
          case 0:
          case 1:
            EXPECT_EQ(m.params, r.total * kF);
            EXPECT_EQ(m.grads, (r.total + r.shard) * kF) << "full bucketed buffer plus the shard";
            EXPECT_EQ(m.peak_grads, m.grads);
            if (stage == 1) stage1_grads = m.grads;
            break;
          case 2:
            EXPECT_EQ(m.params, r.total * kF);
            EXPECT_GE(m.peak_grads, (r.shard + r.max_bucket) * kF);
            EXPECT_LE(m.peak_grads, (r.shard + 3 * r.max_bucket) * kF) << "more than three bucket slots";
            if (world > 1) {
              EXPECT_LT(m.peak_grads, stage1_grads) << "stage 2 should hold less than stage 1";
            }
            break;
          default:
            EXPECT_EQ(m.grads, r.shard * kF) << "only the shard between steps";
            EXPECT_EQ(m.peak_grads, (r.shard + r.max_tensor) * kF) << "plus one padded gradient while reducing";
            EXPECT_EQ(m.params, 0u) << "nothing gathered after release";
            EXPECT_EQ(m.peak_params, r.max_tensor * kF) << "one tensor gathered at a time";
            break;
        }
        if (rank == 0)
          std::printf("%5d %2d %8zu %7zu(%7zu) %9zu %6zu(%6zu) %7zu(%7zu)\n", stage, world, m.params, m.grads,
                      m.peak_grads, m.optimizer, m.comm, m.peak_comm, m.total, m.peak_total);
      }
    }
  }
}

// One micro-step per step: stage 2 makes the same additions as stage 1 (pre-divide by W,
// one reduce-scatter per bucket, added into a zero shard), so parameters are bit-identical.
TEST(ParallelZeroMemory, Stage2EqualsStage1BitForBitWithOneMicroStep) {
  for (int world : {1, 2, 4})
    for (int dtype : {COLLX_FLOAT32, COLLX_BFLOAT16}) {
      if (dtype == COLLX_BFLOAT16 && world != 2) continue;
      Case k;
      k.world = world;
      k.comm_dtype = dtype;
      k.steps = 3;
      k.stage = 1;
      const std::vector<RankRun> one = train(k);
      k.stage = 2;
      const std::vector<RankRun> two = train(k);
      if (::testing::Test::HasFatalFailure()) return;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(two[static_cast<size_t>(r)].grad, one[static_cast<size_t>(r)].grad) << "dp " << world << " rank " << r;
        EXPECT_EQ(two[static_cast<size_t>(r)].params, one[static_cast<size_t>(r)].params)
            << "dp " << world << " dtype " << dtype;
      }
    }
}

// Several micro-steps: stage 1 sums the micro-steps locally, then over ranks; stage 2 over
// ranks per micro-step, then the micro-steps in the shard. Both add the same n = W*M terms
// g/W in another order, so each differs from the exact sum by at most (n-1)*u*sum|g/W|
// (u = 2^-24, plus one rounding of each term by 1/W): they differ by at most twice that.
TEST(ParallelZeroMemory, Stage2AccumulatesMicroStepsWithinTheSummationBound) {
  const double u = std::ldexp(1.0, -24);
  for (int world : {2, 4}) {
    Case k;
    k.world = world;
    k.micro = 3;
    k.steps = 1;
    k.stage = 1;
    const std::vector<RankRun> one = train(k);
    k.stage = 2;
    const std::vector<RankRun> two = train(k);
    if (::testing::Test::HasFatalFailure()) return;
    const double n = world * k.micro;
    size_t differ = 0;
    for (int rank = 0; rank < world; ++rank) {
      const RankRun& a = one[static_cast<size_t>(rank)];
      const RankRun& b = two[static_cast<size_t>(rank)];
      ASSERT_EQ(a.grad.size(), b.grad.size());
      for (const collx_zero_piece_t& p : a.pieces)
        for (size_t i = 0; i < p.count; ++i) {
          double abs_sum = 0;
          for (int r = 0; r < world; ++r)
            for (int m = 0; m < k.micro; ++m) abs_sum += std::fabs(micro_grad(r, p.tensor_id, p.tensor_offset + i, 0, m));
          const double bound = 2 * n * u * abs_sum / world;
          const float x = a.grad[p.shard_offset + i], y = b.grad[p.shard_offset + i];
          differ += x != y;
          ASSERT_LE(std::fabs(static_cast<double>(x) - y), bound)
              << "dp " << world << " tensor " << p.tensor_id << " element " << p.tensor_offset + i;
        }
    }
    std::printf("dp %d, %d micro-steps: %zu gradient elements differ from stage 1 (within the bound)\n", world,
                k.micro, differ);
  }
}

// Rank 0 runs a micro-step alone with a 100 ms deadline: waiting for a slot (two
// reduce-scatters in flight that rank 1 has not joined) or for the reductions at finish
// ends with COLLX_ERR_TIMEOUT naming the bucket. Once rank 1 joins, finishing again
// completes the micro-step on both, and a further step leaves identical replicas.
TEST(ParallelZeroMemory, Stage2SlotWaitEndsByTheDeadlineAndRecovers) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  collx::testing::Signal rank0_timed_out;
  PerRank<ZeroModel> params(2);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, kSizes, kBucket);
    collx_zero_config_t c = collx::testing::zero_test_config(2);
    if (rank == 0) c.timeout_ms = 100;
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    collx::testing::zero_test_load(z, kSizes);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    auto grad = [&](size_t t, size_t j, int s, int m) { return micro_grad(rank, t, j, s, m); };
    if (rank == 0) {
      int timeouts = 0;
      for (size_t t = kSizes.size(); t-- > 0;) {
        float* view = nullptr;
        collx_status_t st = collx_zero_grad_ptr(z, t, &view);
        if (st == COLLX_OK) view[0] = 1.0f;
        timeouts += st == COLLX_ERR_TIMEOUT;
        st = collx_zero_mark_ready(z, t);
        timeouts += st == COLLX_ERR_TIMEOUT;
        ASSERT_TRUE(st == COLLX_OK || st == COLLX_ERR_TIMEOUT) << collx_zero_last_error(z);
      }
      EXPECT_GT(timeouts, 0) << "a third slot should have waited for rank 1";
      EXPECT_EQ(collx_zero_finish_grads(z, 100), COLLX_ERR_TIMEOUT);
      EXPECT_NE(std::string(collx_zero_last_error(z)).find("did not complete within the deadline"), std::string::npos)
          << collx_zero_last_error(z);
      rank0_timed_out.raise();
      ASSERT_EQ(collx_zero_finish_grads(z, 20000), COLLX_OK) << collx_zero_last_error(z);
    } else {
      ASSERT_TRUE(rank0_timed_out.wait()) << "rank 0 never returned";
      collx::testing::zero_test_backward(z, 2, kSizes, 0, 0, grad);
      ASSERT_EQ(collx_zero_finish_grads(z, -1), COLLX_OK) << collx_zero_last_error(z);
    }
    collx::testing::zero_test_grads(z, 2, kSizes, 1, 1, grad);
    ASSERT_EQ(collx_zero_step(z, 1.0), COLLX_OK) << collx_zero_last_error(z);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    ZeroModel p(kSizes.size());
    for (size_t t = 0; t < kSizes.size(); ++t) {
      float* v = nullptr;
      ASSERT_EQ(collx_zero_param_ptr(z, t, &v), COLLX_OK);
      p[t].assign(v, v + kSizes[t]);
    }
    params.set(rank, p);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  EXPECT_EQ(params[1], params[0]) << "replicas differ after the recovered micro-step";
}

TEST(ParallelZeroMemory, MemoryQueryRejectsAShortStruct) {
  ThreadRanks ranks(1, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(1, kSizes, kBucket);
    collx_zero_config_t c = collx::testing::zero_test_config(2);
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    collx_zero_memory_t m{};
    m.size = sizeof m - 1;
    EXPECT_EQ(collx_zero_memory(z, &m), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("memory->size"), std::string::npos);
    EXPECT_EQ(collx_zero_memory(z, nullptr), COLLX_ERR_INVALID_ARG);
    float* view = nullptr;
    ASSERT_EQ(collx_zero_grad_ptr(z, 0, &view), COLLX_OK);
    ASSERT_EQ(collx_zero_mark_ready(z, 0), COLLX_OK);
    EXPECT_EQ(collx_zero_grad_ptr(z, 0, &view), COLLX_ERR_INVALID_USAGE) << "view after the mark";
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("already marked"), std::string::npos);
    EXPECT_EQ(collx_zero_mark_ready(z, 0), COLLX_ERR_INVALID_USAGE);
    EXPECT_EQ(collx_zero_finish_grads(z, -1), COLLX_ERR_INVALID_USAGE) << "tensors never marked";
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("never marked tensor 1"), std::string::npos)
        << collx_zero_last_error(z);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
}

}  // namespace
