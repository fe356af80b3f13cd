// Data-parallel reducer on thread ranks: averaging checked on the gradients themselves,
// in-order bucket launches whatever the mark order, no_sync accumulation, unused and
// twice-marked tensors, bf16/fp16 compression and reduce-scatter mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/low_precision.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::grad_value;
using collx::testing::make_layout;
using collx::testing::mean_value;
using collx::testing::PerRank;
using collx::testing::ThreadRanks;

// Sizes covering 0, 1, W-1, W+1, a prime and a tensor larger than a bucket.
const std::vector<size_t> kSizes = {0, 1, 3, 5, 97, 300, 64};
constexpr size_t kBucket = 128;

collx_dp_config_t dp_config() {
  collx_dp_config_t c;
  EXPECT_EQ(collx_dp_config_init(&c, sizeof c), COLLX_OK);
  c.timeout_ms = 20000;
  return c;
}

void fill(collx_dp_t dp, int rank, size_t t, size_t n, float extra = 0.0f) {
  float* g = nullptr;
  ASSERT_EQ(collx_dp_grad_ptr(dp, t, &g), COLLX_OK);
  for (size_t j = 0; j < n; ++j) g[j] += grad_value(rank, t, j) + extra;
}

std::vector<size_t> mark_order(int rank, size_t n, bool shuffled) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (shuffled) std::shuffle(order.begin(), order.end(), std::mt19937(1234 + static_cast<unsigned>(rank)));
  return order;
}

// One synced step: every rank fills and marks every tensor; returns the whole buffer.
std::vector<float> one_step(collx_comm_t comm, int rank, int world, const collx_dp_config_t& cfg, bool shuffled) {
  collx_layout_t l = make_layout(world, kSizes, kBucket);
  collx_dp_t dp = nullptr;
  EXPECT_EQ(collx_dp_create(comm, l, &cfg, nullptr, &dp), COLLX_OK) << collx_dp_last_error(nullptr);
  for (size_t t : mark_order(rank, kSizes.size(), shuffled)) {
    fill(dp, rank, t, kSizes[t]);
    EXPECT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK) << collx_dp_last_error(dp);
  }
  EXPECT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
  float* buf = nullptr;
  size_t n = 0;
  collx_dp_buffer(dp, &buf, &n);
  std::vector<float> out(buf, buf + n);
  collx_dp_destroy(dp);
  collx_layout_destroy(l);
  return out;
}

// Checks tensor views against the exact mean (or sum) and the padding against zero.
void expect_reduced(const std::vector<float>& buf, int world, bool average, double tol) {
  collx_layout_t l = make_layout(world, kSizes, kBucket);
  std::vector<char> is_data(buf.size(), 0);
  for (size_t t = 0; t < kSizes.size(); ++t) {
    size_t off = 0, n = 0;
    collx_layout_tensor(l, t, &off, &n);
    for (size_t j = 0; j < n; ++j) {
      const double want = mean_value(world, t, j) * (average ? 1 : world);
      EXPECT_NEAR(buf[off + j], want, tol * std::max(1.0, std::fabs(want))) << "tensor " << t << " elem " << j;
      is_data[off + j] = 1;
    }
  }
  for (size_t i = 0; i < buf.size(); ++i) {
    if (!is_data[i]) {
      EXPECT_EQ(buf[i], 0.0f) << "padding element " << i << " is not zero";
    }
  }
  collx_layout_destroy(l);
}

TEST(ParallelDp, AveragesGradientsAndKeepsReplicasIdentical) {
  for (int world : {1, 2, 3, 4}) {
    ThreadRanks ranks(world, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    PerRank<std::vector<float>> got(world);
    ranks.run([&](int rank, collx_comm_t comm) { got.set(rank, one_step(comm, rank, world, dp_config(), true)); });
    expect_reduced(got[0], world, true, 1e-6);
    for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]) << "replica " << r << " differs from rank 0";
  }
}

TEST(ParallelDp, MarkOrderDoesNotChangeBits) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> in_order(3), shuffled(3);
  ranks.run([&](int rank, collx_comm_t comm) {
    in_order.set(rank, one_step(comm, rank, 3, dp_config(), false));
    shuffled.set(rank, one_step(comm, rank, 3, dp_config(), true));
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(in_order[r], shuffled[r]) << "rank " << r;
}

TEST(ParallelDp, SumAndPredivideVariants) {
  ThreadRanks ranks(4, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> sum(4), post(4), sqrtw(4);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_dp_config_t c = dp_config();
    c.average = 0;
    sum.set(rank, one_step(comm, rank, 4, c, true));
    c.average = 1;
    c.predivide = 1.0;  // all after (DeepSpeed postscale)
    post.set(rank, one_step(comm, rank, 4, c, true));
    c.predivide = 2.0;  // FSDP's sqrt(W)
    sqrtw.set(rank, one_step(comm, rank, 4, c, true));
  });
  expect_reduced(sum[0], 4, false, 0);
  expect_reduced(post[0], 4, true, 1e-6);
  expect_reduced(sqrtw[0], 4, true, 1e-6);
}

TEST(ParallelDp, BucketsLaunchOnlyInIndexOrder) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, {200, 200, 200}, 100);  // one tensor per bucket
    collx_dp_t dp = nullptr;
    collx_dp_config_t c = dp_config();
    ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK);
    size_t b0 = 0, b2 = 0;
    collx_layout_tensor_bucket(l, 0, &b0, nullptr);  // reverse layout: tensor 0 is last
    collx_layout_tensor_bucket(l, 2, &b2, nullptr);
    ASSERT_EQ(b2, 0u);
    ASSERT_EQ(b0, 2u);
    int32_t launched = 1;
    ASSERT_EQ(collx_dp_mark_ready(dp, 0), COLLX_OK);  // bucket 2 complete, 0 and 1 not
    collx_dp_bucket_state(dp, 2, nullptr, &launched);
    EXPECT_EQ(launched, 0) << "bucket 2 launched before buckets 0 and 1";
    ASSERT_EQ(collx_dp_mark_ready(dp, 2), COLLX_OK);  // bucket 0 goes
    collx_dp_bucket_state(dp, 0, nullptr, &launched);
    EXPECT_EQ(launched, 1);
    collx_dp_bucket_state(dp, 2, nullptr, &launched);
    EXPECT_EQ(launched, 0);
    ASSERT_EQ(collx_dp_mark_ready(dp, 1), COLLX_OK);  // 1, then the waiting 2
    collx_dp_bucket_state(dp, 2, nullptr, &launched);
    EXPECT_EQ(launched, 1);
    EXPECT_EQ(collx_dp_zero(dp), COLLX_ERR_INVALID_USAGE) << "zero while buckets are in flight";
    EXPECT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
    EXPECT_EQ(collx_dp_zero(dp), COLLX_OK);
    (void)rank;
    collx_dp_destroy(dp);
    collx_layout_destroy(l);
  });
}

TEST(ParallelDp, NoSyncAccumulatesThenReducesOnce) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> got(2);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, kSizes, kBucket);
    collx_dp_t dp = nullptr;
    collx_dp_config_t c = dp_config();
    ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK);
    const int gas = 3;
    for (int micro = 0; micro < gas; ++micro) {
      ASSERT_EQ(collx_dp_set_sync(dp, micro == gas - 1 ? 1 : 0), COLLX_OK);
      for (size_t t = 0; t < kSizes.size(); ++t) {
        fill(dp, rank, t, kSizes[t], static_cast<float>(micro));
        ASSERT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK);
        if (micro < gas - 1) {
          size_t b = 0;
          int32_t launched = 1;
          collx_layout_tensor_bucket(l, t, &b, nullptr);
          collx_dp_bucket_state(dp, b, nullptr, &launched);
          EXPECT_EQ(launched, 0) << "a no_sync micro-step launched a bucket";
        }
      }
      EXPECT_EQ(collx_dp_set_sync(dp, 1), COLLX_ERR_INVALID_USAGE) << "set_sync inside a micro-step";
      ASSERT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
    }
    // Each view holds mean over ranks of sum over micro-steps = gas * mean + (0+1+2).
    for (size_t t = 0; t < kSizes.size(); ++t) {
      float* g = nullptr;
      collx_dp_grad_ptr(dp, t, &g);
      for (size_t j = 0; j < kSizes[t]; ++j) EXPECT_NEAR(g[j], gas * mean_value(2, t, j) + 3.0, 1e-5);
    }
    collx_dp_destroy(dp);
    collx_layout_destroy(l);
  });
}

TEST(ParallelDp, MarkingTwiceIsAnError) {
  ThreadRanks ranks(1, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(1, {10, 10}, 0);
    collx_dp_t dp = nullptr;
    collx_dp_config_t c = dp_config();
    ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK);
    ASSERT_EQ(collx_dp_mark_ready(dp, 1), COLLX_OK);
    EXPECT_EQ(collx_dp_mark_ready(dp, 1), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(collx_dp_last_error(dp)).find("tensor 1 was marked ready twice"), std::string::npos)
        << collx_dp_last_error(dp);
    EXPECT_EQ(collx_dp_mark_ready(dp, 99), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_dp_last_error(dp)).find("tensor 99 is not in the layout"), std::string::npos);
    EXPECT_EQ(collx_dp_grad_ptr(dp, 0, nullptr), COLLX_ERR_INVALID_ARG);  // a NULL output, not a crash
    ASSERT_EQ(collx_dp_mark_ready(dp, 0), COLLX_OK);
    EXPECT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
    collx_dp_destroy(dp);
    collx_layout_destroy(l);
  });
}

TEST(ParallelDp, TensorNeverMarkedFailsEveryRankNamingIt) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::string> msg(3);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(3, kSizes, kBucket);
    collx_dp_t dp = nullptr;
    collx_dp_config_t c = dp_config();
    ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK);
    for (size_t t = 0; t < kSizes.size(); ++t)
      if (!(rank == 2 && t == 4)) collx_dp_mark_ready(dp, t);
    EXPECT_EQ(collx_dp_finish(dp, -1), COLLX_ERR_INVALID_USAGE);
    msg.set(rank, collx_dp_last_error(dp));
    collx_dp_destroy(dp);
    collx_layout_destroy(l);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(msg[r].find("rank 2 never marked tensor 4"), std::string::npos) << msg[r];
  }
}

TEST(ParallelDp, UnusedTensorsReduceTheirViewAsIs) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    for (int allow : {0, 1}) {
      collx_layout_t l = make_layout(2, kSizes, kBucket);
      collx_dp_t dp = nullptr;
      collx_dp_config_t c = dp_config();
      c.allow_unused = allow;
      ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK);
      for (size_t t = 0; t < kSizes.size(); ++t) {
        if (t == 5) {
          if (!allow) {
            ASSERT_EQ(collx_dp_mark_unused(dp, t), COLLX_OK);  // allow: left out
          }
          continue;
        }
        fill(dp, rank, t, kSizes[t]);
        ASSERT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK);
      }
      ASSERT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
      float* g = nullptr;
      collx_dp_grad_ptr(dp, 5, &g);
      for (size_t j = 0; j < kSizes[5]; ++j) ASSERT_EQ(g[j], 0.0f);
      collx_dp_grad_ptr(dp, 4, &g);
      for (size_t j = 0; j < kSizes[4]; ++j) ASSERT_EQ(g[j], static_cast<float>(mean_value(2, 4, j)));
      collx_dp_destroy(dp);
      collx_layout_destroy(l);
    }
  });
}

TEST(ParallelDp, HalfCompressionStaysCloseAndIdentical) {
  ThreadRanks ranks(4, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> bf(4), fp(4);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_dp_config_t c = dp_config();
    c.comm_dtype = COLLX_BFLOAT16;
    bf.set(rank, one_step(comm, rank, 4, c, true));
    c.comm_dtype = COLLX_FLOAT16;
    fp.set(rank, one_step(comm, rank, 4, c, true));
  });
  expect_reduced(bf[0], 4, true, 5e-3);
  expect_reduced(fp[0], 4, true, 1e-3);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(bf[r], bf[0]);
    EXPECT_EQ(fp[r], fp[0]);
  }
}

// What the 16-bit path computed when it rounded on the marking thread: per bucket, in
// order, round the pre-divided float32 bucket, one blocking collective, write back.
void reference_half_reduce(collx_comm_t comm, collx_layout_t l, int32_t mode, int32_t dt, int rank, int world,
                           std::vector<float>* buf) {
  size_t nb = 0;
  collx_layout_num_buckets(l, &nb);
  const float pre = 1.0f / static_cast<float>(world);
  for (size_t b = 0; b < nb; ++b) {
    size_t start = 0, padded = 0, numel = 0;
    collx_layout_bucket(l, b, &start, &padded, &numel);
    if (!padded) continue;
    std::vector<uint16_t> wire(padded);
    collx::parallel::pack_half(buf->data() + start, wire.data(), padded, pre, dt);
    size_t from = 0, n = padded;
    if (mode == COLLX_DP_ALLREDUCE) {
      ASSERT_EQ(collx_allreduce(wire.data(), wire.data(), padded, static_cast<collx_datatype_t>(dt), COLLX_SUM, comm,
                                nullptr),
                COLLX_OK);
    } else {
      n = padded / static_cast<size_t>(world);
      from = static_cast<size_t>(rank) * n;
      ASSERT_EQ(collx_reduce_scatter(wire.data(), wire.data() + from, n, static_cast<collx_datatype_t>(dt), COLLX_SUM,
                                     comm, nullptr),
                COLLX_OK);
    }
    collx::parallel::unpack_half(wire.data() + from, buf->data() + start + from, n, 1.0f, dt);
  }
}

// The reducer's thread rounds, launches and writes back; the bits must be those of the
// marking-thread path, over micro-steps (no_sync, then sync) and repeated steps that zero
// the buffer as soon as finish returns.
TEST(ParallelDp, HalfCompressionOffTheMarkingThreadIsBitIdentical) {
  constexpr int kWorld = 3, kSteps = 4;
  ThreadRanks ranks(kWorld, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    for (int32_t mode : {COLLX_DP_ALLREDUCE, COLLX_DP_REDUCE_SCATTER})
      for (int32_t dt : {COLLX_BFLOAT16, COLLX_FLOAT16}) {
        collx_layout_t l = make_layout(kWorld, kSizes, kBucket);
        collx_dp_config_t c = dp_config();
        c.mode = mode;
        c.comm_dtype = dt;
        collx_dp_t dp = nullptr;
        ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK) << collx_dp_last_error(nullptr);
        float* buf = nullptr;
        size_t total = 0;
        collx_dp_buffer(dp, &buf, &total);
        for (int s = 0; s < kSteps; ++s) {
          ASSERT_EQ(collx_dp_zero(dp), COLLX_OK) << collx_dp_last_error(dp);
          std::vector<float> want(total, 0.0f);  // the same float32 accumulation, kept aside
          for (int micro = 0; micro < 2; ++micro) {
            ASSERT_EQ(collx_dp_set_sync(dp, micro), COLLX_OK);
            const float extra = 0.37f * static_cast<float>(s + micro);
            for (size_t t : mark_order(rank + s, kSizes.size(), true)) {
              fill(dp, rank, t, kSizes[t], extra);
              size_t off = 0, n = 0;
              collx_layout_tensor(l, t, &off, &n);
              for (size_t j = 0; j < n; ++j) want[off + j] += grad_value(rank, t, j) + extra;
              ASSERT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK) << collx_dp_last_error(dp);
            }
            ASSERT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
          }
          reference_half_reduce(comm, l, mode, dt, rank, kWorld, &want);
          size_t differ = 0;
          for (size_t i = 0; i < total; ++i) {
            bool owned = mode == COLLX_DP_ALLREDUCE;
            size_t nb = 0;
            collx_layout_num_buckets(l, &nb);
            for (size_t b = 0; b < nb && !owned; ++b) {
              size_t start = 0, count = 0;
              collx_layout_owned(l, b, rank, &start, &count);
              owned = i >= start && i < start + count;
            }
            if (owned && std::memcmp(&want[i], &buf[i], sizeof(float)) != 0) ++differ;
          }
          EXPECT_EQ(differ, 0u) << "mode " << mode << " type " << dt << " step " << s;
        }
        collx_dp_destroy(dp);
        collx_layout_destroy(l);
      }
  });
}

TEST(ParallelDp, ReduceScatterFillsTheOwnedRanges) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_dp_config_t c = dp_config();
    c.mode = COLLX_DP_REDUCE_SCATTER;
    collx_layout_t l = make_layout(3, kSizes, kBucket);
    collx_dp_t dp = nullptr;
    ASSERT_EQ(collx_dp_create(comm, l, &c, nullptr, &dp), COLLX_OK) << collx_dp_last_error(nullptr);
    for (size_t t = 0; t < kSizes.size(); ++t) {
      fill(dp, rank, t, kSizes[t]);
      ASSERT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK);
    }
    ASSERT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
    float* buf = nullptr;
    collx_dp_buffer(dp, &buf, nullptr);
    size_t checked = 0;
    for (size_t t = 0; t < kSizes.size(); ++t) {
      size_t toff = 0, boff = 0, n = 0;
      collx_layout_tensor_shard(l, t, rank, &toff, &boff, &n);
      for (size_t j = 0; j < n; ++j, ++checked)
        EXPECT_NEAR(buf[boff + j], mean_value(3, t, toff + j), 1e-6);
    }
    EXPECT_GT(checked, 0u);
    collx_dp_destroy(dp);
    collx_layout_destroy(l);
  });
}

TEST(ParallelDp, CreateNamesTheBadArgument) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_dp_config_t c = dp_config();
    collx_dp_t dp = nullptr;
    collx_layout_t wrong_dp = make_layout(4, {10});
    EXPECT_EQ(collx_dp_create(comm, wrong_dp, &c, nullptr, &dp), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find("dp_size 4 but dp_comm has 2"), std::string::npos)
        << collx_dp_last_error(nullptr);
    collx_layout_t per_tensor = make_layout(2, {10}, 0, COLLX_PART_PER_TENSOR);
    c.mode = COLLX_DP_REDUCE_SCATTER;
    EXPECT_EQ(collx_dp_create(comm, per_tensor, &c, nullptr, &dp), COLLX_ERR_INVALID_ARG);
    c = dp_config();
    c.comm_dtype = COLLX_INT32;
    EXPECT_EQ(collx_dp_create(comm, per_tensor, &c, nullptr, &dp), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find("comm_dtype"), std::string::npos);
    collx_layout_config_t lc;
    collx_layout_config_init(&lc, sizeof lc);
    lc.dp_size = 2;
    collx_layout_t bf = nullptr;
    collx_layout_create(&lc, &bf);
    collx_layout_add(bf, 3, 8, COLLX_BFLOAT16, 0);
    c = dp_config();
    EXPECT_EQ(collx_dp_create(comm, bf, &c, nullptr, &dp), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find("not finalized"), std::string::npos);
    collx_layout_finalize(bf);
    EXPECT_EQ(collx_dp_create(comm, bf, &c, nullptr, &dp), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find("tensor 3 has datatype"), std::string::npos);
    EXPECT_EQ(dp, nullptr);
    collx_layout_destroy(wrong_dp);
    collx_layout_destroy(per_tensor);
    collx_layout_destroy(bf);
  });
}

}  // namespace
