// Mixed-precision helpers: the loss-scale trajectory and skipped steps of DeepSpeed's
// state machine, the overflow flag over the right group, the norm counting each element
// once (padding, shards, TP-replicated tensors) and the clip coefficient.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::make_layout;
using collx::testing::PerRank;
using collx::testing::ThreadRanks;

collx_scaler_t make_scaler(double init, int64_t window, int32_t hysteresis, double min_scale = 1.0) {
  collx_scaler_config_t c;
  EXPECT_EQ(collx_scaler_config_init(&c, sizeof c), COLLX_OK);
  c.init_scale = init;
  c.window = window;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  collx_scaler_t s = nullptr;
  EXPECT_EQ(collx_scaler_create(&c, &s), COLLX_OK) << collx_scaler_last_error(nullptr);
  return s;
}

TEST(ParallelMixedPrecision, ScalerFollowsDeepSpeedTrajectory) {
  collx_scaler_t s = make_scaler(65536, 3, 2);
  const std::vector<int> inf = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1};
  const std::vector<double> want = {65536, 65536, 65536, 131072, 131072, 65536,
                                    65536, 65536, 65536, 131072, 131072};
  for (size_t i = 0; i < inf.size(); ++i) {
    int32_t skip = -1;
    ASSERT_EQ(collx_scaler_update(s, inf[i], &skip), COLLX_OK);
    EXPECT_EQ(skip, inf[i]) << "step " << i;
    double scale = 0;
    collx_scaler_scale(s, &scale);
    EXPECT_EQ(scale, want[i]) << "step " << i;
  }
  // Checkpoint round trip: a fresh scaler given the state continues identically.
  collx_scaler_state_t st;
  st.size = sizeof st;
  ASSERT_EQ(collx_scaler_get_state(s, &st), COLLX_OK);
  collx_scaler_t t = make_scaler(65536, 3, 2);
  ASSERT_EQ(collx_scaler_set_state(t, &st), COLLX_OK);
  int32_t k1 = 0, k2 = 0;
  collx_scaler_update(s, 1, &k1);
  collx_scaler_update(t, 1, &k2);
  double a = 0, b = 0;
  collx_scaler_scale(s, &a);
  collx_scaler_scale(t, &b);
  EXPECT_EQ(a, 65536.0);  // the second overflow in a row backs off
  EXPECT_EQ(a, b);
  collx_scaler_destroy(s);
  collx_scaler_destroy(t);
}

TEST(ParallelMixedPrecision, OverflowAtMinimumScaleIsAnError) {
  collx_scaler_t s = make_scaler(2, 1000, 1, 1);
  int32_t skip = 0;
  ASSERT_EQ(collx_scaler_update(s, 1, &skip), COLLX_OK);  // 2 -> 1
  EXPECT_EQ(collx_scaler_update(s, 1, &skip), COLLX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(collx_scaler_last_error(s)).find("already at its minimum"), std::string::npos);
  collx_scaler_destroy(s);
  collx_scaler_config_t c;
  collx_scaler_config_init(&c, sizeof c);
  c.backoff = 1.5;
  collx_scaler_t bad = nullptr;
  EXPECT_EQ(collx_scaler_create(&c, &bad), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_scaler_last_error(nullptr)).find("backoff"), std::string::npos);
}

TEST(ParallelMixedPrecision, FoundNonfiniteUnscalesInTheSamePass) {
  std::vector<float> v = {2, 4, 8};
  int32_t found = -1;
  ASSERT_EQ(collx_found_nonfinite(v.data(), v.size(), 0.5f, &found), COLLX_OK);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 4}));
  v[1] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(collx_found_nonfinite(v.data(), v.size(), 1.0f, &found), COLLX_OK);
  EXPECT_EQ(found, 1);
}

// 4 ranks as DP 2 x TP 2: an overflow on one TP rank only must make every rank skip when
// the flag is reduced over TP|DP, and reducing over DP alone leaves the other TP half
// stepping (the divergence trap).
TEST(ParallelMixedPrecision, OverflowFlagOverTheWholeInstance) {
  ThreadRanks ranks(4, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<int32_t> all(4), dp_only(4);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_grid_config_t gc;
    collx_grid_config_init(&gc, sizeof gc);
    gc.tp = 2;
    collx_grid_t grid = nullptr;
    ASSERT_EQ(collx_grid_create(comm, &gc, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
    collx_comm_t instance = nullptr, dp = nullptr;
    collx_grid_comm(grid, COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP | COLLX_AXIS_PP, &instance);
    collx_grid_comm(grid, COLLX_AXIS_DP, &dp);
    int32_t f = rank == 1 ? 1 : 0;  // tp_rank 1, dp_rank 0
    ASSERT_EQ(collx_flag_any(&f, instance), COLLX_OK);
    all.set(rank, f);
    int32_t g = rank == 1 ? 1 : 0;
    ASSERT_EQ(collx_flag_any(&g, dp), COLLX_OK);
    dp_only.set(rank, g);
    collx_grid_destroy(grid);
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(all[r], 1) << "rank " << r;
  EXPECT_EQ(dp_only[0] + dp_only[1] + dp_only[2] + dp_only[3], 2) << "DP-only flag reached the other TP half";
}

TEST(ParallelMixedPrecision, NormCountsEachElementOnce) {
  const std::vector<size_t> sizes = {7, 1, 30, 5};
  const std::vector<uint32_t> flags = {0, COLLX_TENSOR_TP_REPLICATED, 0, COLLX_TENSOR_SHARED};
  for (int32_t dp : {1, 3, 4}) {
    collx_layout_t l = make_layout(dp, sizes, 16, COLLX_PART_FLAT, flags);
    size_t total = 0;
    collx_layout_total(l, &total);
    std::vector<float> buf(total, 1000.0f);  // padding and gaps hold garbage on purpose
    double want_all = 0, want_sharded_part = 0;
    for (size_t t = 0; t < sizes.size(); ++t) {
      size_t off = 0, n = 0;
      collx_layout_tensor(l, t, &off, &n);
      for (size_t j = 0; j < n; ++j) {
        buf[off + j] = static_cast<float>(j % 5) - 2.0f + 0.5f * static_cast<float>(t);
        want_all += static_cast<double>(buf[off + j]) * buf[off + j];
        if (flags[t] == 0) want_sharded_part += static_cast<double>(buf[off + j]) * buf[off + j];
      }
    }
    double whole = 0;
    ASSERT_EQ(collx_norm_sq_local(l, buf.data(), -1, 0, 1, &whole), COLLX_OK);
    EXPECT_DOUBLE_EQ(whole, want_all) << "dp " << dp;
    double shards = 0;
    for (int32_t r = 0; r < dp; ++r) {
      double part = 0;
      ASSERT_EQ(collx_norm_sq_local(l, buf.data(), r, 0, 1, &part), COLLX_OK);
      shards += part;
    }
    EXPECT_NEAR(shards, want_all, 1e-9 * want_all) << "dp " << dp;
    double tp1 = 0;  // TP rank 1, not the owner of the tied copy: unflagged tensors only
    ASSERT_EQ(collx_norm_sq_local(l, buf.data(), -1, 1, 0, &tp1), COLLX_OK);
    EXPECT_DOUBLE_EQ(tp1, want_sharded_part);
    EXPECT_EQ(collx_norm_sq_local(l, buf.data(), dp, 0, 1, &tp1), COLLX_ERR_INVALID_ARG);
    collx_layout_destroy(l);
  }
}

TEST(ParallelMixedPrecision, GlobalNormAndClipCoefficient) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<double> norms(3);
  ranks.run([&](int rank, collx_comm_t comm) {
    double n = 0;
    ASSERT_EQ(collx_global_norm(static_cast<double>(rank + 1), &n, comm), COLLX_OK);
    norms.set(rank, n);
  });
  for (int r = 0; r < 3; ++r) EXPECT_DOUBLE_EQ(norms[r], std::sqrt(6.0));
  double coef = 0;
  collx_clip_coef(10.0, 1.0, &coef);
  EXPECT_NEAR(coef, 1.0 / (10.0 + 1e-6), 1e-15);
  collx_clip_coef(0.5, 1.0, &coef);
  EXPECT_EQ(coef, 1.0);
  collx_clip_coef(10.0, 0.0, &coef);
  EXPECT_EQ(coef, 1.0);
}

}  // namespace
