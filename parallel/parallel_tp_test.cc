// Tensor- and sequence-parallel ops on thread ranks: each pair round-trips, the
// reductions sum, vocab-parallel cross-entropy matches full softmax cross-entropy, and
// only SP_NORM gradients are all-reduced by finalize.
#include <gtest/gtest.h>

#include <cmath>
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

std::vector<float> matrix(size_t rows, size_t cols, int salt) {
  std::vector<float> m(rows * cols);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>((i * 13 + static_cast<size_t>(salt) * 7) % 23) - 11;
  return m;
}

TEST(ParallelTp, LastDimSplitAndGatherRoundTrip) {
  for (int t : {1, 2, 3}) {
    ThreadRanks ranks(t, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.run([&](int rank, collx_comm_t comm) {
      const size_t rows = 5, cols = 6;
      std::vector<float> x = matrix(rows, cols, 1), part(rows * cols / t), back(rows * cols);
      ASSERT_EQ(collx_tp_split_last(x.data(), part.data(), rows, cols, COLLX_FLOAT32, comm), COLLX_OK);
      for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols / t; ++j) ASSERT_EQ(part[i * (cols / t) + j], x[i * cols + rank * (cols / t) + j]);
      ASSERT_EQ(collx_tp_gather_last(part.data(), back.data(), rows, cols / t, COLLX_FLOAT32, comm), COLLX_OK)
          << collx_last_error(nullptr);
      EXPECT_EQ(back, x);
      if (t > 1) {
        EXPECT_EQ(collx_tp_split_last(x.data(), part.data(), rows, 7, COLLX_FLOAT32, comm), COLLX_ERR_INVALID_ARG);
        EXPECT_NE(std::string(collx_last_error(nullptr)).find("cols 7 is not divisible"), std::string::npos);
      }
    });
  }
}

TEST(ParallelTp, SequenceDimGatherAndReduceScatter) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    const size_t rows = 6, cols = 4;
    std::vector<float> x = matrix(rows, cols, 2), shard(rows / 3 * cols), full(rows * cols);
    ASSERT_EQ(collx_sp_split_first(x.data(), shard.data(), rows, cols, COLLX_FLOAT32, comm), COLLX_OK);
    ASSERT_EQ(collx_sp_gather_first(shard.data(), full.data(), rows / 3, cols, COLLX_FLOAT32, comm), COLLX_OK);
    EXPECT_EQ(full, x);
    // Reduce-scatter of per-rank partial sums: row block r of the sum over ranks.
    std::vector<float> partial = matrix(rows, cols, 10 + rank), mine(rows / 3 * cols);
    ASSERT_EQ(collx_sp_reduce_scatter_first(partial.data(), mine.data(), rows, cols, COLLX_FLOAT32, comm), COLLX_OK);
    for (size_t k = 0; k < mine.size(); ++k) {
      float want = 0;
      for (int r = 0; r < 3; ++r) want += matrix(rows, cols, 10 + r)[rank * mine.size() + k];
      ASSERT_EQ(mine[k], want);
    }
    // g forward / f backward: the sum on every rank.
    std::vector<float> y = matrix(2, 2, rank);
    ASSERT_EQ(collx_tp_allreduce(y.data(), y.size(), COLLX_FLOAT32, comm), COLLX_OK);
    for (size_t k = 0; k < y.size(); ++k)
      ASSERT_EQ(y[k], matrix(2, 2, 0)[k] + matrix(2, 2, 1)[k] + matrix(2, 2, 2)[k]);
  });
}

TEST(ParallelTp, VocabRangeCoversTheVocabulary) {
  for (int64_t vocab : {0, 1, 10, 11}) {
    for (int32_t t : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int32_t r = 0; r < t; ++r) {
        int64_t s = 0, e = 0;
        ASSERT_EQ(collx_tp_vocab_range(vocab, t, r, &s, &e), COLLX_OK);
        EXPECT_EQ(s, next);
        EXPECT_LE(e - s, (vocab + t - 1) / t);
        next = e;
      }
      EXPECT_EQ(next, vocab);
    }
  }
  int64_t s, e;
  EXPECT_EQ(collx_tp_vocab_range(10, 2, 2, &s, &e), COLLX_ERR_INVALID_ARG);
}

TEST(ParallelTp, VocabParallelCrossEntropyMatchesFullSoftmax) {
  const int t = 3;
  const size_t n = 4;
  const int64_t vocab = 11;
  std::vector<float> logits(n * vocab);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;
  const std::vector<int64_t> targets = {0, 5, 10, 7};
  // Reference in double.
  std::vector<double> ref_loss(n), ref_grad(n * vocab);
  for (size_t i = 0; i < n; ++i) {
    double mx = -1e30, se = 0;
    for (int64_t j = 0; j < vocab; ++j) mx = std::max(mx, static_cast<double>(logits[i * vocab + j]));
    for (int64_t j = 0; j < vocab; ++j) se += std::exp(logits[i * vocab + j] - mx);
    ref_loss[i] = std::log(se) - (logits[i * vocab + targets[i]] - mx);
    for (int64_t j = 0; j < vocab; ++j)
      ref_grad[i * vocab + j] = std::exp(logits[i * vocab + j] - mx) / se - (j == targets[i] ? 1 : 0);
  }
  ThreadRanks ranks(t, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    int64_t s = 0, e = 0;
    collx_tp_vocab_range(vocab, t, rank, &s, &e);
    const size_t vl = static_cast<size_t>(e - s);
    std::vector<float> mine(n * vl), soft(n * vl), loss(n), dlog(n * vl);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < vl; ++j) mine[i * vl + j] = logits[i * vocab + static_cast<size_t>(s) + j];
    ASSERT_EQ(collx_tp_vocab_ce_fwd(mine.data(), targets.data(), n, vl, s, vocab, loss.data(), soft.data(), comm),
              COLLX_OK)
        << collx_last_error(nullptr);
    const std::vector<float> ones(n, 1.0f);
    ASSERT_EQ(collx_tp_vocab_ce_bwd(soft.data(), targets.data(), ones.data(), n, vl, s, dlog.data()), COLLX_OK);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(loss[i], ref_loss[i], 1e-6 * std::max(1.0, ref_loss[i])) << "row " << i;
      for (size_t j = 0; j < vl; ++j) EXPECT_NEAR(dlog[i * vl + j], ref_grad[i * vocab + static_cast<size_t>(s) + j], 1e-6);
    }
    const std::vector<int64_t> bad = {0, 11, 0, 0};
    EXPECT_EQ(collx_tp_vocab_ce_fwd(mine.data(), bad.data(), n, vl, s, vocab, loss.data(), nullptr, comm),
              COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("targets[1] = 11"), std::string::npos);
  });
}

// Under SP each TP rank holds a different LayerNorm gradient: finalize sums exactly the
// SP_NORM tensors, leaving the others as they were.
TEST(ParallelTp, FinalizeSumsOnlySequenceParallelNormGradients) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    collx_layout_t l = make_layout(1, {6, 4, 3}, 0, COLLX_PART_FLAT, {COLLX_TENSOR_SP_NORM, 0, COLLX_TENSOR_SP_NORM});
    size_t total = 0;
    collx_layout_total(l, &total);
    std::vector<float> buf(total, static_cast<float>(rank + 1));
    ASSERT_EQ(collx_tp_finalize_grads(l, buf.data(), comm), COLLX_OK) << collx_last_error(nullptr);
    for (uint64_t id : {0, 1, 2}) {
      size_t off = 0, n = 0;
      collx_layout_tensor(l, id, &off, &n);
      for (size_t j = 0; j < n; ++j) EXPECT_EQ(buf[off + j], id == 1 ? rank + 1.0f : 3.0f) << "tensor " << id;
    }
    collx_layout_destroy(l);
  });
}

}  // namespace
