// MoE dispatch/combine against a one-process reference: every rank's tokens and routing
// are generated from its rank, so each thread can rebuild the whole batch and compute the
// MoE layer without communication. EP = 2 and 4, uneven routing, idle experts and ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::ThreadRanks;

constexpr size_t kHidden = 5;

// One rank's batch: tokens, top-k expert ids and gate weights.
struct Batch {
  size_t tokens = 0;
  std::vector<float> x;
  std::vector<int32_t> idx;
  std::vector<float> gates;
};

// Skewed routing: most copies go to the low experts, expert E-1 gets none unless
// `use_last`; rank 1 of 4 has no tokens at all when `idle_rank`. Values are small
// multiples of 1/8 (exact in float).
Batch make_batch(int rank, int32_t E, int32_t k, bool idle_rank) {
  Batch b;
  b.tokens = idle_rank && rank == 1 ? 0 : static_cast<size_t>(3 + 4 * rank);
  for (size_t t = 0; t < b.tokens; ++t) {
    for (size_t h = 0; h < kHidden; ++h)
      b.x.push_back(static_cast<float>(static_cast<int>((t * 7 + h * 3 + static_cast<size_t>(rank) * 11) % 13) - 6) / 8.0f);
    for (int32_t j = 0; j < k; ++j) {
      const size_t v = t * 5 + static_cast<size_t>(j * 3 + rank);
      int32_t e = static_cast<int32_t>((v * v) % static_cast<size_t>(E - 1));  // never E-1
      if (v % 4 == 0) e = 0;                                                  // expert 0 is popular
      b.idx.push_back(e);
      b.gates.push_back(static_cast<float>(1 + (v % 3)) / 4.0f);
    }
  }
  return b;
}

// Expert e: y = (e + 1) * x + e / 4, elementwise (different per expert, exact in float).
float expert_fn(int32_t e, float x) { return static_cast<float>(e + 1) * x + static_cast<float>(e) / 4.0f; }

// What expert_in must hold on rank r: for each local expert, for each source rank, its
// copies in (token, slot) order.
std::vector<float> expected_expert_in(const std::vector<Batch>& all, int r, int32_t E, int32_t k) {
  const int32_t ep = static_cast<int32_t>(all.size()), L = E / ep;
  std::vector<float> out;
  for (int32_t e = r * L; e < (r + 1) * L; ++e)
    for (const Batch& b : all)
      for (size_t t = 0; t < b.tokens; ++t)
        for (int32_t j = 0; j < k; ++j)
          if (b.idx[t * static_cast<size_t>(k) + static_cast<size_t>(j)] == e)
            out.insert(out.end(), b.x.begin() + static_cast<long>(t * kHidden),
                       b.x.begin() + static_cast<long>((t + 1) * kHidden));
  return out;
}

// The MoE layer on one process: y[t] = sum_j gate * expert(x[t]).
std::vector<float> reference_layer(const Batch& b, int32_t k) {
  std::vector<float> y(b.tokens * kHidden, 0.0f);
  for (size_t t = 0; t < b.tokens; ++t)
    for (int32_t j = 0; j < k; ++j) {
      const size_t c = t * static_cast<size_t>(k) + static_cast<size_t>(j);
      for (size_t h = 0; h < kHidden; ++h) y[t * kHidden + h] += b.gates[c] * expert_fn(b.idx[c], b.x[t * kHidden + h]);
    }
  return y;
}

collx_moe_config_t moe_config(int32_t E, int32_t k) {
  collx_moe_config_t cfg;
  collx_moe_config_init(&cfg, sizeof cfg);
  cfg.num_experts = E;
  cfg.top_k = k;
  return cfg;
}

void check_layer(int ep, int32_t E, int32_t k, bool idle_rank) {
  ThreadRanks world(ep, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<Batch> all;
  for (int r = 0; r < ep; ++r) all.push_back(make_batch(r, E, k, idle_rank));
  world.run([&](int rank, collx_comm_t comm) {
    // gtest's failure reporting is thread-safe on this platform.
    auto fail = [rank](const std::string& m) { ADD_FAILURE() << "rank " << rank << ": " << m; };
    const Batch& b = all[static_cast<size_t>(rank)];
    const collx_moe_config_t cfg = moe_config(E, k);
    collx_moe_plan_t plan = nullptr;
    if (collx_moe_plan_create(comm, &cfg, b.idx.data(), b.tokens, &plan) != COLLX_OK)
      return fail(std::string("plan: ") + collx_moe_last_error(nullptr));
    const int32_t L = E / ep;
    size_t R = 0;
    std::vector<size_t> per_expert(static_cast<size_t>(L));
    collx_moe_plan_recv(plan, &R, per_expert.data());
    const std::vector<float> want_in = expected_expert_in(all, rank, E, k);
    std::vector<float> expert_in(R * kHidden, -99.0f);
    if (collx_moe_dispatch(plan, b.x.data(), nullptr, expert_in.data(), kHidden, COLLX_FLOAT32) != COLLX_OK)
      return fail(std::string("dispatch: ") + collx_moe_last_error(plan));
    if (expert_in != want_in) fail("expert_in differs from the reference order");
    // Run the local experts on their consecutive rows.
    std::vector<float> expert_out(expert_in.size());
    size_t row = 0;
    for (int32_t e = 0; e < L; ++e)
      for (size_t i = 0; i < per_expert[static_cast<size_t>(e)]; ++i, ++row)
        for (size_t h = 0; h < kHidden; ++h)
          expert_out[row * kHidden + h] = expert_fn(rank * L + e, expert_in[row * kHidden + h]);
    if (row != R) fail("expert counts do not sum to the received rows");
    std::vector<float> y(b.tokens * kHidden, -99.0f), copies(b.tokens * static_cast<size_t>(k) * kHidden);
    if (collx_moe_combine(plan, expert_out.data(), b.gates.data(), y.data(), copies.data(), kHidden, COLLX_FLOAT32) !=
        COLLX_OK)
      return fail(std::string("combine: ") + collx_moe_last_error(plan));
    const std::vector<float> want = reference_layer(b, k);
    for (size_t i = 0; i < y.size(); ++i)
      if (std::fabs(y[i] - want[i]) > 1e-6f) {
        fail("output " + std::to_string(i) + " is " + std::to_string(y[i]) + ", reference " + std::to_string(want[i]));
        break;
      }
    for (size_t c = 0; c < b.tokens * static_cast<size_t>(k); ++c)
      for (size_t h = 0; h < kHidden; ++h)
        if (copies[c * kHidden + h] != expert_fn(b.idx[c], b.x[(c / static_cast<size_t>(k)) * kHidden + h]))
          return fail("copy " + std::to_string(c) + " is not its expert's output");
    collx_moe_plan_destroy(plan);
  });
}

TEST(ParallelMoe, DispatchCombineMatchReferenceEp2) { check_layer(2, 4, 2, false); }
TEST(ParallelMoe, DispatchCombineMatchReferenceEp4Top3) { check_layer(4, 8, 3, false); }
TEST(ParallelMoe, RankWithoutTokensAndIdleExpertsEp4) { check_layer(4, 4, 1, true); }

// Dispatch with scales and combine with the same weights are adjoint:
// <dispatch_w(x), y> == <x, combine_w(y)> summed over the ranks, in float64.
TEST(ParallelMoe, DispatchAndCombineAreAdjoint) {
  const int ep = 4;
  const int32_t E = 8, k = 2;
  ThreadRanks world(ep, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<double> lhs(ep), rhs(ep);
  world.run([&](int rank, collx_comm_t comm) {
    Batch b = make_batch(rank, E, k, false);
    const collx_moe_config_t cfg = moe_config(E, k);
    collx_moe_plan_t plan = nullptr;
    ASSERT_EQ(collx_moe_plan_create(comm, &cfg, b.idx.data(), b.tokens, &plan), COLLX_OK) << collx_moe_last_error(nullptr);
    size_t R = 0;
    collx_moe_plan_recv(plan, &R, nullptr);
    std::vector<double> x(b.tokens * kHidden), dx(x.size()), y(R * kHidden), dy(y.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i + 7 * rank));
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::cos(static_cast<double>(3 * i + rank));
    ASSERT_EQ(collx_moe_dispatch(plan, x.data(), b.gates.data(), dy.data(), kHidden, COLLX_FLOAT64), COLLX_OK);
    ASSERT_EQ(collx_moe_combine(plan, y.data(), b.gates.data(), dx.data(), nullptr, kHidden, COLLX_FLOAT64), COLLX_OK);
    double l = 0, r = 0;
    for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
    for (size_t i = 0; i < x.size(); ++i) r += x[i] * dx[i];
    lhs[static_cast<size_t>(rank)] = l;
    rhs[static_cast<size_t>(rank)] = r;
    collx_moe_plan_destroy(plan);
  });
  double l = 0, r = 0;
  for (int i = 0; i < ep; ++i) {
    l += lhs[static_cast<size_t>(i)];
    r += rhs[static_cast<size_t>(i)];
  }
  EXPECT_NE(l, 0.0);
  EXPECT_NEAR(l, r, 1e-9 * std::fabs(l));
}

// An expert id out of range on one rank, or a config that differs, fails the plan on every
// rank with a message naming that rank (no rank is left waiting).
TEST(ParallelMoe, BadRoutingIsNamedOnEveryRank) {
  ThreadRanks world(2, 5000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const collx_moe_config_t cfg = moe_config(4, 2);
    std::vector<int32_t> idx = {0, 1, 2, rank == 1 ? 9 : 3};
    collx_moe_plan_t plan = nullptr;
    EXPECT_EQ(collx_moe_plan_create(comm, &cfg, idx.data(), 2, &plan), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(plan, nullptr);
    std::string m = collx_moe_last_error(nullptr);
    EXPECT_NE(m.find("rank 1 routed token 1 slot 1 to expert 9"), std::string::npos) << m;
  });
  world.run([&](int rank, collx_comm_t comm) {
    const collx_moe_config_t cfg = moe_config(rank == 0 ? 4 : 6, 1);
    std::vector<int32_t> idx = {0};
    collx_moe_plan_t plan = nullptr;
    EXPECT_EQ(collx_moe_plan_create(comm, &cfg, idx.data(), 1, &plan), COLLX_ERR_MISMATCH);
    std::string m = collx_moe_last_error(nullptr);
    EXPECT_NE(m.find("rank 1 passed num_experts=6"), std::string::npos) << m;
  });
  world.run([&](int rank, collx_comm_t comm) {
    const collx_moe_config_t cfg = moe_config(3, 1);  // not a multiple of EP = 2
    std::vector<int32_t> idx = {0};
    collx_moe_plan_t plan = nullptr;
    EXPECT_EQ(collx_moe_plan_create(comm, &cfg, idx.data(), 1, &plan), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_moe_last_error(nullptr)).find("multiple of the EP size 2"), std::string::npos);
    (void)rank;
  });
  world.run([&](int, collx_comm_t comm) {
    const collx_moe_config_t cfg = moe_config(2, 1);
    std::vector<int32_t> idx = {0, 1};
    collx_moe_plan_t plan = nullptr;
    ASSERT_EQ(collx_moe_plan_create(comm, &cfg, idx.data(), 2, &plan), COLLX_OK);
    std::vector<int32_t> x(2);
    EXPECT_EQ(collx_moe_dispatch(plan, x.data(), nullptr, x.data(), 1, COLLX_INT32), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_moe_last_error(plan)).find("not supported"), std::string::npos);
    collx_moe_plan_destroy(plan);
  });
  // Rows of different sizes on the two ranks: the all-to-allv's size check names the
  // disagreement instead of delivering misaligned rows.
  world.run([&](int rank, collx_comm_t comm) {
    const collx_moe_config_t cfg = moe_config(2, 1);
    std::vector<int32_t> idx = {0, 1};
    collx_moe_plan_t plan = nullptr;
    ASSERT_EQ(collx_moe_plan_create(comm, &cfg, idx.data(), 2, &plan), COLLX_OK);
    const size_t hidden = rank == 0 ? 3 : 4;
    std::vector<float> x(2 * hidden, 1.0f), in(2 * hidden);
    // The rank that sees the sizes differ gets COLLX_ERR_MISMATCH, the other COLLX_ERR_REMOTE
    // naming it; the communicator is failed afterwards (this must stay the last case).
    const collx_status_t st = collx_moe_dispatch(plan, x.data(), nullptr, in.data(), hidden, COLLX_FLOAT32);
    EXPECT_TRUE(st == COLLX_ERR_MISMATCH || st == COLLX_ERR_REMOTE) << collx_moe_last_error(plan);
    const std::string m = collx_moe_last_error(plan);
    EXPECT_NE(m.find("all-to-allv"), std::string::npos) << m;
    EXPECT_NE(m.find("COLLX_ERR_MISMATCH"), std::string::npos) << m;
    collx_moe_plan_destroy(plan);
  });
}

}  // namespace
