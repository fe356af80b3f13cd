// Exact resume: AdamW moments, master weights, step count, learning-rate schedule
// (collx_zero_set_lr) and the loss scaler's state, saved at dp 4 as sharded pieces or whole
// tensors, resumed at dp 4, 2 and 1: the final parameters are bit-identical to an
// uninterrupted dp 4 run (across dp sizes with stage 2's fixed-order reduction).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "parallel/parallel_test_util.h"
#include "parallel/zero_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::make_layout;
using collx::testing::PerRank;
using collx::testing::ThreadRanks;
using collx::testing::ZeroModel;

const std::vector<size_t> kSizes = {300, 1000, 17, 600, 5};
constexpr size_t kBucket = 512;
constexpr int kBatch = 4;         // samples in the global batch, split over the dp ranks
constexpr int kIterations = 7;    // iterations of the whole run
constexpr int kCut = 4;           // the checkpoint is taken before this iteration
constexpr int kOverflowAt = 2;    // the loss scaler sees an overflow here: the step is skipped
constexpr int kKinds = 3;         // COLLX_ZERO_MASTER, _EXP_AVG, _EXP_AVG_SQ

float sample_grad(int sample, size_t t, size_t j, int it) {
  const float x = static_cast<float>((j * 31 + t * 7 + static_cast<size_t>(sample) * 13) % 29) - 14.0f;
  return 0.037f * x + 0.011f * static_cast<float>(it) - 0.0031f * static_cast<float>(sample * sample);
}

// The engine's gradient of its samples: a pairwise tree over them, divided by their count
// (a power of two: exact), times the loss scale (a power of two: exact). The library then
// averages over dp as a tree in rank order, so every dp size computes
// ((s0 + s1) + (s2 + s3)) / 4 with the same roundings.
float local_grad(int world, int rank, size_t t, size_t j, int it, float scale) {
  const int per = kBatch / world;
  float v[kBatch];
  for (int i = 0; i < per; ++i) v[i] = sample_grad(rank * per + i, t, j, it);
  for (int step = 1; step < per; step *= 2)
    for (int i = 0; i + step < per; i += 2 * step) v[i] += v[i + step];
  return v[0] / static_cast<float>(per) * scale;
}

double lr_at(int it) { return 1e-2 * (0.55 + 0.45 * std::cos(3.14159265358979 * it / kIterations)); }

struct Saved {
  std::vector<collx_zero_piece_t> pieces;
  std::vector<float> shard[kKinds];
  ZeroModel full[kKinds];
  int64_t step = 0;
  collx_scaler_state_t scaler{};
};

struct RunSetup {
  int stage = 2;
  int deterministic = 1;
};

enum class Restore { kNone, kPieces, kFull, kPiecesButNotTheStep };

collx_scaler_t make_scaler() {
  collx_scaler_config_t c;
  collx_scaler_config_init(&c, sizeof c);
  // Grows after every 2 clean steps and backs off at the first overflow, so the state
  // changes before and after the checkpoint.
  c.window = 2;
  c.hysteresis = 1;
  c.init_scale = 512;
  collx_scaler_t s = nullptr;
  EXPECT_EQ(collx_scaler_create(&c, &s), COLLX_OK) << collx_scaler_last_error(nullptr);
  return s;
}

void save(collx_zero_t z, collx_scaler_t scaler, Saved* out) {
  size_t n = 0;
  collx_zero_pieces(z, nullptr, 0, &n);
  out->pieces.resize(n);
  collx_zero_pieces(z, out->pieces.data(), n, &n);
  for (int k = 0; k < kKinds; ++k) {
    float* data = nullptr;
    size_t count = 0;
    ASSERT_EQ(collx_zero_state_shard(z, k, &data, &count), COLLX_OK) << collx_zero_last_error(z);
    out->shard[k].assign(data, data + count);
    out->full[k].resize(kSizes.size());
    for (size_t t = 0; t < kSizes.size(); ++t) {
      out->full[k][t].resize(kSizes[t]);
      ASSERT_EQ(collx_zero_full_state(z, k, t, out->full[k][t].data()), COLLX_OK) << collx_zero_last_error(z);
    }
  }
  collx_zero_get_step(z, &out->step);
  out->scaler.size = sizeof out->scaler;
  collx_scaler_get_state(scaler, &out->scaler);
}

void restore(collx_zero_t z, collx_scaler_t scaler, const std::vector<Saved>& saved, Restore how) {
  for (int k = 0; k < kKinds; ++k) {
    if (how == Restore::kFull) {
      for (size_t t = 0; t < kSizes.size(); ++t) {
        ASSERT_EQ(collx_zero_load_state(z, k, t, 0, kSizes[t], saved[0].full[k][t].data()), COLLX_OK)
            << collx_zero_last_error(z);
      }
      continue;
    }
    for (const Saved& s : saved) {
      for (const collx_zero_piece_t& p : s.pieces) {
        ASSERT_EQ(collx_zero_load_state(z, k, p.tensor_id, p.tensor_offset, p.count, s.shard[k].data() + p.shard_offset),
                  COLLX_OK)
            << collx_zero_last_error(z);
      }
    }
  }
  if (how != Restore::kPiecesButNotTheStep) {
    ASSERT_EQ(collx_zero_set_step(z, saved[0].step), COLLX_OK);
  }
  ASSERT_EQ(collx_scaler_set_state(scaler, &saved[0].scaler), COLLX_OK) << collx_scaler_last_error(scaler);
}

// One iteration: scaled gradients, the scaler's decision (an overflow skips the step and
// drops the gradients), the schedule's learning rate, the step and publish.
void iterate(collx_zero_t z, collx_scaler_t scaler, const RunSetup& s, int world, int rank, int it) {
  double scale = 0;
  collx_scaler_scale(scaler, &scale);
  auto grad = [&](size_t t, size_t j, int step, int) {
    return local_grad(world, rank, t, j, step, static_cast<float>(scale));
  };
  collx::testing::zero_test_grads(z, s.stage, kSizes, it, 1, grad);
  int32_t skip = 0;
  ASSERT_EQ(collx_scaler_update(scaler, it == kOverflowAt ? 1 : 0, &skip), COLLX_OK);
  if (skip) {
    float* g = nullptr;
    size_t count = 0;
    collx_zero_shard(z, nullptr, &g, &count);
    std::fill(g, g + count, 0.0f);
    return;
  }
  ASSERT_EQ(collx_zero_set_lr(z, lr_at(it)), COLLX_OK);
  ASSERT_EQ(collx_zero_step(z, 1.0 / scale), COLLX_OK) << collx_zero_last_error(z);
  ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
}

// Iterations [from, kIterations) at dp `world`, after restoring `saved` (unless kNone);
// saves into *save_to before iteration kCut when asked. Returns the final parameters.
ZeroModel run(const RunSetup& s, int world, int from, const std::vector<Saved>& saved, Restore how,
              std::vector<Saved>* save_to) {
  SCOPED_TRACE("stage " + std::to_string(s.stage) + " dp " + std::to_string(world) + " from " + std::to_string(from));
  ThreadRanks ranks(world, 20000);
  EXPECT_TRUE(ranks.ok()) << ranks.error();
  PerRank<ZeroModel> final_params(world);
  PerRank<Saved> checkpoint(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(world, kSizes, kBucket, s.stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT);
    collx_zero_config_t c = collx::testing::zero_test_config(s.stage);
    c.deterministic = s.deterministic;
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    collx_scaler_t scaler = make_scaler();
    if (how == Restore::kNone)
      collx::testing::zero_test_load(z, kSizes);
    else
      restore(z, scaler, saved, how);
    ASSERT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
    for (int it = from; it < kIterations; ++it) {
      if (it == kCut && save_to) {
        Saved mine;
        save(z, scaler, &mine);
        checkpoint.set(rank, mine);
      }
      iterate(z, scaler, s, world, rank, it);
    }
    final_params.set(rank, collx::testing::zero_test_full(z, kSizes));
    collx_scaler_destroy(scaler);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
  });
  if (save_to) {
    save_to->clear();
    for (int r = 0; r < world; ++r) save_to->push_back(checkpoint[r]);
  }
  for (int r = 1; r < world; ++r) EXPECT_EQ(final_params[r], final_params[0]) << "replica " << r;
  return final_params[0];
}

// Stage 2 with the fixed-order reduction: a checkpoint taken at dp 4 resumes at dp 4, 2
// and 1 (from pieces and from whole tensors), bit-identical to the uninterrupted run; a
// resume that forgets the step count is not (the test can tell).
TEST(ParallelZeroResume, CheckpointAtDp4ResumesAtDp2AndDp1BitIdentical) {
  const RunSetup s;
  std::vector<Saved> saved;
  const ZeroModel want = run(s, 4, 0, {}, Restore::kNone, &saved);
  ASSERT_EQ(saved.size(), 4u);
  ASSERT_GT(saved[0].step, 0);
  EXPECT_LT(saved[0].step, kCut) << "the overflow should have skipped a step";
  EXPECT_EQ(run(s, 4, kCut, saved, Restore::kPieces, nullptr), want) << "same dp from pieces";
  EXPECT_EQ(run(s, 2, kCut, saved, Restore::kPieces, nullptr), want) << "dp 2 from pieces";
  EXPECT_EQ(run(s, 1, kCut, saved, Restore::kFull, nullptr), want) << "dp 1 from whole tensors";
  EXPECT_EQ(run(s, 2, kCut, saved, Restore::kFull, nullptr), want) << "dp 2 from whole tensors";
  EXPECT_NE(run(s, 2, kCut, saved, Restore::kPiecesButNotTheStep, nullptr), want)
      << "AdamW's bias correction depends on the step count: without it the run must differ";
  // The uninterrupted run at dp 2 and 1 computes the same bits too.
  EXPECT_EQ(run(s, 2, 0, {}, Restore::kNone, nullptr), want);
  EXPECT_EQ(run(s, 1, 0, {}, Restore::kNone, nullptr), want);
}

// The default reductions (collx_ireduce_scatter, whose order depends on dp) resume
// bit-identically at the same dp size, for stages 0-3.
TEST(ParallelZeroResume, SameDpResumeIsBitIdenticalForEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    RunSetup s;
    s.stage = stage;
    s.deterministic = 0;
    std::vector<Saved> saved;
    const ZeroModel want = run(s, 4, 0, {}, Restore::kNone, &saved);
    EXPECT_EQ(run(s, 4, kCut, saved, Restore::kPieces, nullptr), want) << "stage " << stage;
  }
}

TEST(ParallelZeroResume, StateCallsNameTheBadArgument) {
  ThreadRanks ranks(1, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int, collx_comm_t comm) {
    collx_layout_t l = make_layout(1, kSizes, kBucket);
    collx_zero_config_t c = collx::testing::zero_test_config(1);
    c.optimizer = COLLX_OPT_SGD;
    collx_zero_t z = nullptr;
    ASSERT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_OK) << collx_zero_last_error(nullptr);
    float* data = nullptr;
    EXPECT_EQ(collx_zero_state_shard(z, COLLX_ZERO_EXP_AVG_SQ, &data, nullptr), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("COLLX_ZERO_EXP_AVG_SQ"), std::string::npos);
    EXPECT_EQ(collx_zero_state_shard(z, 7, &data, nullptr), COLLX_ERR_INVALID_ARG);
    const float v[2] = {1, 2};
    EXPECT_EQ(collx_zero_load_state(z, COLLX_ZERO_EXP_AVG, 2, 16, 2, v), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(z)).find("outside tensor 2"), std::string::npos);
    EXPECT_EQ(collx_zero_set_lr(z, -1), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_zero_set_lr(z, NAN), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_zero_set_lr(z, 0.25), COLLX_OK);
    double lr = 0;
    EXPECT_EQ(collx_zero_get_lr(z, &lr), COLLX_OK);
    EXPECT_EQ(lr, 0.25);
    EXPECT_EQ(collx_zero_set_step(z, -1), COLLX_ERR_INVALID_ARG);
    collx_zero_destroy(z);
    collx_layout_destroy(l);
    c.stage = 1;
    c.deterministic = 1;
    l = make_layout(1, kSizes, kBucket);
    EXPECT_EQ(collx_zero_create(comm, l, &c, &z), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("stage 2 only"), std::string::npos);
    collx_layout_destroy(l);
  });
}

}  // namespace
