// Vocab-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy): each TP rank holds
// a block of vocabulary columns; three all-reduces of one float per row give the global
// max, the target logit and the softmax denominator; the backward is local.
#include <cmath>
#include <vector>

#include "parallel/free_calls.h"

namespace collx {
namespace parallel {
namespace {

collx_status_t ce_fwd(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t start,
                      int64_t vocab, float* loss, float* softmax, collx_comm_t comm) {
  if (!n) return COLLX_OK;
  if (!logits && v_local) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: logits is NULL");
  if (!targets || !loss) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: targets or loss is NULL");
  for (size_t i = 0; i < n; ++i)
    if (targets[i] < 0 || targets[i] >= vocab)
      return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: targets[" + std::to_string(i) + "] = " +
                                                  std::to_string(targets[i]) + " is outside [0, " +
                                                  std::to_string(vocab) + ")");
  std::vector<float> row_max(n, -INFINITY), target_logit(n, 0.0f), sum_exp(n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < v_local; ++j) row_max[i] = std::max(row_max[i], logits[i * v_local + j]);
  collx_status_t st = collx_allreduce(row_max.data(), row_max.data(), n, COLLX_FLOAT32, COLLX_MAX, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(comm, st, "collx_tp_vocab_ce_fwd");
  for (size_t i = 0; i < n; ++i) {
    const int64_t local = targets[i] - start;
    if (local >= 0 && local < static_cast<int64_t>(v_local))
      target_logit[i] = logits[i * v_local + static_cast<size_t>(local)] - row_max[i];
    for (size_t j = 0; j < v_local; ++j) sum_exp[i] += std::exp(logits[i * v_local + j] - row_max[i]);
  }
  st = collx_allreduce(target_logit.data(), target_logit.data(), n, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
  if (st == COLLX_OK) st = collx_allreduce(sum_exp.data(), sum_exp.data(), n, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(comm, st, "collx_tp_vocab_ce_fwd");
  for (size_t i = 0; i < n; ++i) {
    loss[i] = std::log(sum_exp[i]) - target_logit[i];
    if (!softmax) continue;
    for (size_t j = 0; j < v_local; ++j)
      softmax[i * v_local + j] = std::exp(logits[i * v_local + j] - row_max[i]) / sum_exp[i];
  }
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_tp_vocab_ce_fwd(const float* logits, const int64_t* targets, size_t n,
                                               size_t v_local, int64_t vocab_start, int64_t vocab, float* loss,
                                               float* softmax, collx_comm_t tp_comm) {
  return free_call("collx_tp_vocab_ce_fwd", [&] {
    return ce_fwd(logits, targets, n, v_local, vocab_start, vocab, loss, softmax, tp_comm);
  });
}

COLLX_API collx_status_t collx_tp_vocab_ce_bwd(const float* softmax, const int64_t* targets, const float* dloss,
                                               size_t n, size_t v_local, int64_t vocab_start, float* dlogits) {
  if (n && v_local && (!softmax || !targets || !dloss || !dlogits))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_bwd: a buffer is NULL");
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < v_local; ++j) {
      const float onehot = vocab_start + static_cast<int64_t>(j) == targets[i] ? 1.0f : 0.0f;
      dlogits[i * v_local + j] = (softmax[i * v_local + j] - onehot) * dloss[i];
    }
  return COLLX_OK;
}

}  // extern "C"
