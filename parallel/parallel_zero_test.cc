// ZeRO stages 1, 2, 3 on thread ranks against a single-process optimizer on the averaged
// gradients: parameters per step, replicas identical, the shard norm, checkpoint pieces
// reloaded at another dp size, and stage 3's gather limits and order independence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::grad_value;
using collx::testing::make_layout;
using collx::testing::PerRank;
using collx::testing::ThreadRanks;
using Model = std::vector<std::vector<float>>;

const std::vector<size_t> kSizes = {0, 1, 3, 5, 97, 300, 64};
constexpr size_t kBucket = 128;
constexpr int kSteps = 3;
constexpr int kMicro = 2;

Model initial() {
  Model m(kSizes.size());
  for (size_t t = 0; t < kSizes.size(); ++t)
    for (size_t j = 0; j < kSizes[t]; ++j) m[t].push_back(0.01f * static_cast<float>(j % 11) - 0.05f + 0.001f * t);
  return m;
}

float micro_grad(int rank, size_t t, size_t j, int step, int micro) {
  return 0.1f * grad_value(rank, t, j) + 0.01f * static_cast<float>(step) - 0.02f * static_cast<float>(micro);
}

collx_zero_config_t zero_config(int stage, int optimizer) {
  collx_zero_config_t c;
  EXPECT_EQ(collx_zero_config_init(&c, sizeof c), COLLX_OK);
  c.stage = stage;
  c.optimizer = optimizer;
  c.lr = optimizer == COLLX_OPT_SGD ? 0.05 : 1e-2;
  c.weight_decay = 0.01;
  c.momentum = optimizer == COLLX_OPT_SGD ? 0.9 : 0.0;
  c.timeout_ms = 20000;
  return c;
}

// torch.optim.SGD / AdamW on whole tensors, in double: the single-process reference.
struct Reference {
  Model p, m, v;
  int steps = 0;
  explicit Reference(Model init) : p(std::move(init)), m(p), v(p) {
    for (auto& t : m) std::fill(t.begin(), t.end(), 0.0f);
    for (auto& t : v) std::fill(t.begin(), t.end(), 0.0f);
  }
  void step(const Model& g, const collx_zero_config_t& c) {
    ++steps;
    for (size_t t = 0; t < p.size(); ++t)
      for (size_t j = 0; j < p[t].size(); ++j) {
        double pj = p[t][j], gj = g[t][j];
        if (c.optimizer == COLLX_OPT_SGD) {
          gj += c.weight_decay * pj;
          m[t][j] = static_cast<float>(steps == 1 ? gj : c.momentum * m[t][j] + gj);
          pj -= c.lr * m[t][j];
        } else {
          pj *= 1 - c.lr * c.weight_decay;
          m[t][j] = static_cast<float>(c.beta1 * m[t][j] + (1 - c.beta1) * gj);
          v[t][j] = static_cast<float>(c.beta2 * v[t][j] + (1 - c.beta2) * gj * gj);
          const double denom = std::sqrt(v[t][j] / (1 - std::pow(c.beta2, steps))) + c.eps;
          pj -= c.lr / (1 - std::pow(c.beta1, steps)) * m[t][j] / denom;
        }
        p[t][j] = static_cast<float>(pj);
      }
  }
};

Model averaged_grads(int world, int step) {
  Model g(kSizes.size());
  for (size_t t = 0; t < kSizes.size(); ++t)
    for (size_t j = 0; j < kSizes[t]; ++j) {
      double s = 0;
      for (int r = 0; r < world; ++r)
        for (int mi = 0; mi < kMicro; ++mi) s += micro_grad(r, t, j, step, mi);
      g[t].push_back(static_cast<float>(s / world));
    }
  return g;
}

std::vector<uint64_t> all_ids(int rank) {
  std::vector<uint64_t> ids;
  for (size_t t = 0; t < kSizes.size(); ++t) ids.push_back(t);
  if (rank % 2) std::reverse(ids.begin(), ids.end());  // ranks ask in different orders
  return ids;
}

// The parameters every rank sees after publish (stage 3: fetched, then released).
Model read_params(collx_zero_t z, int stage, int rank) {
  std::vector<uint64_t> ids = all_ids(rank);
  if (stage == 3) {
    EXPECT_EQ(collx_zero3_fetch(z, ids.data(), ids.size()), COLLX_OK) << collx_zero_last_error(z);
  }
  Model out(kSizes.size());
  for (size_t t = 0; t < kSizes.size(); ++t) {
    float* p = nullptr;
    EXPECT_EQ(collx_zero_param_ptr(z, t, &p), COLLX_OK) << collx_zero_last_error(z);
    if (p) out[t].assign(p, p + kSizes[t]);
  }
  if (stage == 3) {
    EXPECT_EQ(collx_zero3_release(z, ids.data(), ids.size()), COLLX_OK);
  }
  return out;
}

// One micro-step of gradients into the handle. Stages 1, 2 mark in a per-rank order (the
// buckets still launch in order); stage 3's reduce-scatters are collectives per tensor, so
// every rank must issue them in the same order.
void backward(collx_zero_t z, int stage, int rank, int step, int micro) {
  for (size_t t : all_ids(stage == 3 ? 0 : rank)) {
    std::vector<float> g(kSizes[t]);
    for (size_t j = 0; j < g.size(); ++j) g[j] = micro_grad(rank, t, j, step, micro);
    if (stage == 3) {
      ASSERT_EQ(collx_zero3_reduce_grad(z, t, g.data()), COLLX_OK) << collx_zero_last_error(z);
      continue;
    }
    float* view = nullptr;
    ASSERT_EQ(collx_zero_grad_ptr(z, t, &view), COLLX_OK);
    for (size_t j = 0; j < g.size(); ++j) view[j] += g[j];
    ASSERT_EQ(collx_zero_mark_ready(z, t), COLLX_OK) << collx_zero_last_error(z);
  }
}

double rel_error(const Model& a, const Model& b) {
  double num = 0, den = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t j = 0; j < a[t].size(); ++j) {
      num += (static_cast<double>(a[t][j]) - b[t][j]) * (static_cast<double>(a[t][j]) - b[t][j]);
      den += static_cast<double>(b[t][j]) * b[t][j];
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

void train_and_compare(int stage, int optimizer, int world) {
  SCOPED_TRACE("stage " + std::to_string(stage) + " optimizer " + std::to_string(optimizer) + " world " +
               std::to_string(world));
  ThreadRanks ranks(world, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  const collx_zero_config_t cfg = zero_config(stage, optimizer);
  Reference ref(initial());
  std::vector<Model> want;
  std::vector<double> want_norm;
  for (int s = 0; s < kSteps; ++s) {
    Model g = averaged_grads(world, s);
    double n2 = 0;
    for (auto& t : g)
      for (float x : t) n2 += static_cast<double>(x) * x;
    want_norm.push_back(std::sqrt(n2));
    ref.step(g, cfg);
    want.push_back(ref.p);
  }
  PerRank<std::vector<Model>> got(world);
  PerRank<std::vector<double>> norms(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(world, kSizes, kBucket, stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT);
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &cfg, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    Model init = initial();
    for (size_t t = 0; t < kSizes.size(); ++t) ASSERT_EQ(collx_zero_load(z, t, 0, kSizes[t], init[t].data()), COLLX_OK);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    std::vector<Model> mine;
    std::vector<double> my_norms;
    for (int s = 0; s < kSteps; ++s) {
      for (int mi = 0; mi < kMicro; ++mi) {
        ASSERT_EQ(collx_zero_set_boundary(z, mi == kMicro - 1 ? 1 : 0), COLLX_OK) << collx_zero_last_error(z);
        backward(z, stage, rank, s, mi);
        ASSERT_EQ(collx_zero_finish_grads(z, -1), COLLX_OK) << collx_zero_last_error(z);
      }
      double local = 0, norm = 0;
      ASSERT_EQ(collx_zero_grad_norm_sq(z, 0, 1, &local), COLLX_OK);
      ASSERT_EQ(collx_global_norm(local, &norm, comm), COLLX_OK);
      my_norms.push_back(norm);
      ASSERT_EQ(collx_zero_step(z, 1.0), COLLX_OK) << collx_zero_last_error(z);
      ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
      mine.push_back(read_params(z, stage, rank));
    }
    got.set(rank, mine);
    norms.set(rank, my_norms);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_LT(rel_error(got[0][s], want[s]), 1e-5) << "step " << s;
    EXPECT_NEAR(norms[0][s], want_norm[s], 1e-5 * want_norm[s]) << "norm at step " << s;
    for (int r = 1; r < world; ++r) EXPECT_EQ(got[r][s], got[0][s]) << "replica " << r << " step " << s;
  }
}

TEST(ParallelZero, Stage1MatchesSingleProcess) {
  for (int w : {1, 2, 3}) train_and_compare(1, COLLX_OPT_ADAMW, w);
  train_and_compare(1, COLLX_OPT_SGD, 4);
}

TEST(ParallelZero, Stage2MatchesSingleProcess) {
  for (int w : {2, 4}) train_and_compare(2, COLLX_OPT_SGD, w);
  train_and_compare(2, COLLX_OPT_ADAMW, 3);
}

TEST(ParallelZero, Stage3MatchesSingleProcess) {
  for (int w : {1, 2, 3}) train_and_compare(3, COLLX_OPT_SGD, w);
  train_and_compare(3, COLLX_OPT_ADAMW, 4);
}

// Master pieces saved at dp 4 (padding excluded), reloaded at dp 2 and consolidated:
// every tensor bit-identical.
TEST(ParallelZero, PiecesResumeAtAnotherDpSize) {
  struct Saved {
    std::vector<collx_zero_piece_t> pieces;
    std::vector<float> master;
  };
  PerRank<Saved> saved(4);
  PerRank<Model> full(4);
  {
    ThreadRanks ranks(4, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.run([&](int rank, collx_comm_t comm) {
      collx_layout_t l = make_layout(4, kSizes, kBucket);
      collx_zero_config_t c = zero_config(1, COLLX_OPT_SGD);
      collx_zero_t z = nullptr;
      ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
      Model init = initial();
      for (size_t t = 0; t < kSizes.size(); ++t) collx_zero_load(z, t, 0, kSizes[t], init[t].data());
      backward(z, 1, rank, 0, 0);
      ASSERT_EQ(collx_zero_finish_grads(z, -1), COLLX_OK);
      ASSERT_EQ(collx_zero_step(z, 1.0), COLLX_OK);
      Saved s;
      size_t n = 0;
      collx_zero_pieces(z, nullptr, 0, &n);
      s.pieces.resize(n);
      collx_zero_pieces(z, s.pieces.data(), n, &n);
      float* master = nullptr;
      size_t count = 0;
      collx_zero_shard(z, &master, nullptr, &count);
      s.master.assign(master, master + count);
      saved.set(rank, s);
      Model f(kSizes.size());
      for (size_t t = 0; t < kSizes.size(); ++t) {
        f[t].resize(kSizes[t]);
        ASSERT_EQ(collx_zero_full_tensor(z, t, f[t].data()), COLLX_OK);
      }
      full.set(rank, f);
      collx_zero_destroy(z);
      collx_layout_destroy(l);
    });
  }
  std::vector<size_t> covered(kSizes.size(), 0);
  for (int r = 0; r < 4; ++r)
    for (const auto& p : saved[r].pieces) covered[p.tensor_id] += p.count;
  for (size_t t = 0; t < kSizes.size(); ++t) EXPECT_EQ(covered[t], kSizes[t]) << "pieces of tensor " << t;
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<Model> reloaded(2);
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, kSizes, kBucket, COLLX_PART_PER_TENSOR);  // stage 3 now
    collx_zero_config_t c = zero_config(3, COLLX_OPT_SGD);
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    for (int r = 0; r < 4; ++r)
      for (const auto& p : saved[r].pieces)
        ASSERT_EQ(collx_zero_load(z, p.tensor_id, p.tensor_offset, p.count, saved[r].master.data() + p.shard_offset),
                  COLLX_OK);
    Model f(kSizes.size());
    for (size_t t = 0; t < kSizes.size(); ++t) {
      f[t].resize(kSizes[t]);
      ASSERT_EQ(collx_zero_full_tensor(z, t, f[t].data()), COLLX_OK);
    }
    reloaded.set(0, f);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  EXPECT_EQ(reloaded[0], full[0]);
  EXPECT_EQ(full[3], full[0]);
}

TEST(ParallelZero, Stage3GathersUnderTheLiveLimit) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, {100, 100, 100, 2}, 0, COLLX_PART_PER_TENSOR);
    collx_zero_config_t c = zero_config(3, COLLX_OPT_SGD);
    c.max_live_elems = 210;
    c.persist_elems = 2;
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);  // gathers the persistent tensor 3
    size_t live = 0, peak = 0;
    collx_zero3_live(z, &live, &peak);
    EXPECT_EQ(live, 2u);
    const uint64_t two[] = {1, 0}, third[] = {2};
    ASSERT_EQ(collx_zero3_prefetch(z, two, 2), COLLX_OK);
    collx_zero3_live(z, &live, nullptr);
    EXPECT_EQ(live, 202u);
    ASSERT_EQ(collx_zero3_prefetch(z, third, 1), COLLX_OK);  // does not fit: not issued
    collx_zero3_live(z, &live, nullptr);
    EXPECT_EQ(live, 202u);
    EXPECT_EQ(collx_zero3_fetch(z, third, 1), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("above max_live_elems 210"), std::string::npos)
        << collx_zero_last_error(z);
    float* p = nullptr;
    EXPECT_EQ(collx_zero_param_ptr(z, 2, &p), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("tensor 2 is not gathered"), std::string::npos);
    ASSERT_EQ(collx_zero3_fetch(z, two, 2), COLLX_OK);  // waits for the prefetch
    EXPECT_EQ(collx_zero_param_ptr(z, 0, &p), COLLX_OK);
    EXPECT_EQ(collx_zero_publish(z), COLLX_ERR_INVALID_USAGE) << "publish with tensors still gathered";
    ASSERT_EQ(collx_zero3_release(z, two, 2), COLLX_OK);
    ASSERT_EQ(collx_zero3_fetch(z, third, 1), COLLX_OK);
    collx_zero3_live(z, &live, &peak);
    EXPECT_EQ(live, 102u);
    EXPECT_EQ(peak, 202u);
    EXPECT_EQ(collx_zero_mark_ready(z, 0), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("stages 0, 1 and 2 only"), std::string::npos);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
}

// Rank 0 publishes alone with a short deadline: COLLX_ERR_TIMEOUT, and the all-gathers it
// leaves running keep no handle (which would hold the communicator forever). Rank 1
// publishes afterwards, so they complete; a barrier orders them before the handles go.
TEST(ParallelZero, PublishTimeoutLeavesNoHandleHoldingTheCommunicator) {
  std::weak_ptr<collx::Communicator> rank0;
  {
    ThreadRanks ranks(2, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    rank0 = collx::testing::watch_communicator(ranks.comm(0));
    collx::testing::Signal rank0_timed_out;
    ranks.run([&](int rank, collx_comm_t comm) {
      collx_layout_t l = make_layout(2, kSizes, kBucket);
      collx_zero_config_t c = zero_config(1, COLLX_OPT_SGD);
      if (rank == 0) c.timeout_ms = 200;
      collx_zero_t z = nullptr;
      ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
      if (rank == 0) {
        EXPECT_EQ(collx_zero_publish(z), COLLX_ERR_TIMEOUT);
        rank0_timed_out.raise();
      } else {
        ASSERT_TRUE(rank0_timed_out.wait()) << "rank 0 never returned from its publish";
        EXPECT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
      }
      EXPECT_EQ(collx_barrier(comm, nullptr), COLLX_OK) << collx_last_error(comm);
      collx_zero_destroy(z);
      collx_layout_destroy(l);
    });
  }
  EXPECT_TRUE(rank0.expired()) << "an all-gather of the timed-out publish still holds rank 0's communicator";
}

TEST(ParallelZero, CreateNamesTheBadArgument) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t flat = make_layout(2, {10});
    collx_zero_config_t c = zero_config(3, COLLX_OPT_SGD);
    collx_zero_t z = nullptr;
    EXPECT_EQ(collx_zero_create(comm, flat, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("COLLX_PART_PER_TENSOR"), std::string::npos);
    collx_zero_config_t unset;
    ASSERT_EQ(collx_zero_config_init(&unset, sizeof unset), COLLX_OK);
    EXPECT_EQ(collx_zero_create(comm, flat, &unset, &z), COLLX_ERR_INVALID_ARG) << "stage left unset";
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("stage is -1"), std::string::npos);
    c.stage = 4;
    EXPECT_EQ(collx_zero_create(comm, flat, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("stage is 4"), std::string::npos);
    c = zero_config(1, COLLX_OPT_NONE);
    ASSERT_EQ(collx_zero_create(comm, flat, &c, &z), COLLX_OK);
    EXPECT_EQ(collx_zero_step(z, 1.0), COLLX_ERR_INVALID_USAGE);
    const float v[11] = {};
    EXPECT_EQ(collx_zero_load(z, 0, 5, 6, v), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("outside tensor 0"), std::string::npos);
    collx_zero_destroy(z);
    collx_layout_destroy(flat);
  });
}

// Stage 3 with the prefetch plan: an engine that fetches one tensor at a time, forward
// (0..n-1) then backward (n-1..0, gradients computed from the gathered parameters), per
// step `order(step)` gives the forward order. Results per step, the plan's counters and
// the live high-water mark of every rank.
struct PlanRun {
  std::vector<Model> params;  // rank 0, per step, consolidated with collx_zero_full_tensor
  PerRank<collx_zero3_plan_stats_t> stats{3};
  PerRank<std::vector<collx_zero3_plan_stats_t>> per_step{3};
  PerRank<size_t> peak{3};
};

const std::vector<size_t> kPlanSizes = {100, 60, 100, 40, 100, 2};

std::vector<uint64_t> forward_order(int step, bool changed) {
  std::vector<uint64_t> ids = {0, 1, 2, 3, 4, 5};
  if (changed && step >= 2) std::swap(ids[1], ids[3]);  // the model's use changes at step 2
  return ids;
}

void plan_train(const collx_zero_config_t& cfg, int world, int steps, bool changed, PlanRun* out) {
  ThreadRanks ranks(world, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<Model>> got(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(world, kPlanSizes, 0, COLLX_PART_PER_TENSOR);
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &cfg, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    for (size_t t = 0; t < kPlanSizes.size(); ++t) {
      std::vector<float> init(kPlanSizes[t]);
      for (size_t j = 0; j < init.size(); ++j) init[j] = 0.01f * static_cast<float>((j + t) % 13) - 0.06f;
      ASSERT_EQ(collx_zero_load(z, t, 0, init.size(), init.data()), COLLX_OK);
    }
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    std::vector<Model> mine;
    std::vector<collx_zero3_plan_stats_t> step_stats;
    for (int s = 0; s < steps; ++s) {
      std::vector<uint64_t> fwd = forward_order(s, changed), order = fwd;
      order.insert(order.end(), fwd.rbegin(), fwd.rend());
      for (size_t k = 0; k < order.size(); ++k) {
        const uint64_t id = order[k];
        ASSERT_EQ(collx_zero3_fetch(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
        float* p = nullptr;
        ASSERT_EQ(collx_zero_param_ptr(z, id, &p), COLLX_OK) << collx_zero_last_error(z);
        std::vector<float> g(kPlanSizes[id]);
        for (size_t j = 0; j < g.size(); ++j) g[j] = 0.5f * p[j] + micro_grad(rank, id, j, s, 0);
        ASSERT_EQ(collx_zero3_release(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
        if (k < fwd.size()) continue;  // forward: the parameters only
        ASSERT_EQ(collx_zero3_reduce_grad(z, id, g.data()), COLLX_OK) << collx_zero_last_error(z);
      }
      ASSERT_EQ(collx_zero_step(z, 1.0), COLLX_OK) << collx_zero_last_error(z);
      ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
      Model f(kPlanSizes.size());
      for (size_t t = 0; t < kPlanSizes.size(); ++t) {
        f[t].resize(kPlanSizes[t]);
        ASSERT_EQ(collx_zero_full_tensor(z, t, f[t].data()), COLLX_OK);
      }
      mine.push_back(f);
      collx_zero3_plan_stats_t st{};
      st.size = sizeof st;
      ASSERT_EQ(collx_zero3_plan_stats(z, &st), COLLX_OK);
      step_stats.push_back(st);
    }
    got.set(rank, mine);
    out->per_step.set(rank, step_stats);
    out->stats.set(rank, step_stats.back());
    size_t peak = 0;
    collx_zero3_live(z, nullptr, &peak);
    out->peak.set(rank, peak);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  out->params = got[0];
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]) << "replica " << r;
}

collx_zero_config_t plan_config(int32_t depth, size_t max_live) {
  collx_zero_config_t c = zero_config(3, COLLX_OPT_ADAMW);
  c.prefetch_depth = depth;
  c.max_live_elems = max_live;
  c.persist_elems = 2;
  return c;
}

TEST(ParallelZero, Stage3PlanIsRecordedThenUsedBitIdentical) {
  constexpr int kWorld = 3, kPlanSteps = 3;
  PlanRun off, on;
  plan_train(plan_config(0, 0), kWorld, kPlanSteps, false, &off);
  plan_train(plan_config(2, 0), kWorld, kPlanSteps, false, &on);
  ASSERT_EQ(on.params.size(), static_cast<size_t>(kPlanSteps));
  EXPECT_EQ(on.params, off.params) << "the plan changes when tensors travel, never their values";
  EXPECT_EQ(off.stats[0].state, 0);
  EXPECT_EQ(off.stats[0].prefetched, 0u);
  for (int r = 0; r < kWorld; ++r) {
    const auto& first = on.per_step[r][0];
    EXPECT_EQ(first.state, 2) << "the first step's order is the plan";
    EXPECT_EQ(first.length, 12u);
    EXPECT_EQ(first.hits, 0u) << "nothing is prefetched while recording";
    const auto& last = on.stats[r];
    EXPECT_GT(on.per_step[r][1].hits, 0u) << "step 2 uses the plan";
    EXPECT_GT(last.prefetched, 0u);
    EXPECT_EQ(last.rerecords, 0u);
    EXPECT_EQ(last.evicted, 0u);
  }
}

TEST(ParallelZero, Stage3PlanNeverPassesTheLiveLimit) {
  constexpr int kWorld = 2, kPlanSteps = 3;
  // Room for two 100-element tensors and the persistent one: depth 4 must be held back.
  const size_t limit = 2 * 100 + 2;
  PlanRun off, on;
  plan_train(plan_config(0, limit), kWorld, kPlanSteps, false, &off);
  collx_zero_config_t c = plan_config(4, limit);
  plan_train(c, kWorld, kPlanSteps, false, &on);
  EXPECT_EQ(on.params, off.params);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_LE(on.peak[r], limit) << "rank " << r;
    EXPECT_GT(on.stats[r].deferred, 0u) << "prefetches held back by max_live_elems";
    EXPECT_GT(on.stats[r].hits, 0u);
  }
  // The byte budget alone: one 100-element tensor ahead at most.
  c = plan_config(4, 0);
  c.prefetch_bytes = 100 * sizeof(float);
  PlanRun bytes;
  plan_train(c, kWorld, kPlanSteps, false, &bytes);
  EXPECT_EQ(bytes.params, off.params);
  EXPECT_GT(bytes.stats[0].deferred, 0u);
  EXPECT_GT(bytes.stats[0].hits, 0u);
}

TEST(ParallelZero, Stage3PlanRecordsAgainWhenTheOrderChanges) {
  constexpr int kWorld = 2, kPlanSteps = 5;
  PlanRun off, on;
  plan_train(plan_config(0, 0), kWorld, kPlanSteps, true, &off);
  plan_train(plan_config(2, 0), kWorld, kPlanSteps, true, &on);
  EXPECT_EQ(on.params, off.params);
  const auto& steps = on.per_step[0];
  EXPECT_EQ(steps[1].rerecords, 0u);
  EXPECT_EQ(steps[2].rerecords, 1u) << "step 3 leaves the recorded order";
  EXPECT_EQ(steps[2].state, 2) << "and its new order is the plan from step 4";
  EXPECT_EQ(steps[4].rerecords, 1u);
  EXPECT_GT(steps[4].hits, steps[3].hits) << "the new plan is used";
}

TEST(ParallelZero, Stage3PlanRejectsBadConfigAndCalls) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(2, {10, 20}, 0, COLLX_PART_PER_TENSOR);
    collx_zero_t z = nullptr;
    collx_zero_config_t c = plan_config(-1, 0);
    EXPECT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("prefetch_depth is -1"), std::string::npos)
        << collx_zero_last_error(nullptr);
    c.prefetch_depth = 5000;
    EXPECT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("up to 1024"), std::string::npos);
    c = plan_config(2, 0);
    c.prefetch_bytes = 3;
    EXPECT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("prefetch_bytes is 3"), std::string::npos);
    // A caller compiled before the plan fields: accepted, with the default plan.
    c = plan_config(2, 0);
    c.size = offsetof(collx_zero_config_t, prefetch_depth);
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    collx_zero3_plan_stats_t st{};
    EXPECT_EQ(collx_zero3_plan_stats(z, &st), COLLX_ERR_INVALID_ARG) << "stats.size not set";
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("stats->size is 0"), std::string::npos);
    st.size = sizeof st;
    ASSERT_EQ(collx_zero3_plan_stats(z, &st), COLLX_OK);
    EXPECT_EQ(st.state, 1);
    const uint64_t ids[] = {1, 0};
    ASSERT_EQ(collx_zero3_fetch(z, ids, 2), COLLX_OK);
    ASSERT_EQ(collx_zero3_plan_stats(z, &st), COLLX_OK);
    EXPECT_EQ(st.length, 2u);
    ASSERT_EQ(collx_zero3_plan_record(z), COLLX_OK);
    ASSERT_EQ(collx_zero3_plan_stats(z, &st), COLLX_OK);
    EXPECT_EQ(st.length, 0u);
    collx_zero_destroy(z);
    c = plan_config(0, 0);
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK);
    EXPECT_EQ(collx_zero3_plan_record(z), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("prefetch_depth > 0"), std::string::npos);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
}

}  // namespace
