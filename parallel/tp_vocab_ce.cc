// Vocab-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy): each TP rank holds
// a block of vocabulary columns; three all-reduces of one float per row give the global
// max, the target logit and the softmax denominator; the backward is local.
//
// Device buffers: the same steps as lib/cuda kernels on the thread's parallel stream, the
// all-reduces on the stream too, the per-row temporaries in the thread's device workspace.
// The host waits only for a copy of the targets, checked before any communication as on
// host buffers. The emulated device computes the host's bits; a GPU's expf/logf differ from
// the host's by a few ulp.
#include <cmath>
#include <vector>

#include "parallel/device_buffers.h"
#include "parallel/free_calls.h"

namespace collx {
namespace parallel {
namespace {

// Every target in [0, vocab); every rank sees the same targets, so all fail alike.
collx_status_t check_targets(const int64_t* targets, size_t n, int64_t vocab) {
  for (size_t i = 0; i < n; ++i)
    if (targets[i] < 0 || targets[i] >= vocab)
      return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: targets[" + std::to_string(i) + "] = " +
                                                  std::to_string(targets[i]) + " is outside [0, " +
                                                  std::to_string(vocab) + ")");
  return COLLX_OK;
}

collx_status_t ce_fwd(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t start,
                      int64_t vocab, float* loss, float* softmax, collx_comm_t comm) {
  if (!n) return COLLX_OK;
  if (!logits && v_local) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: logits is NULL");
  if (!targets || !loss) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_fwd: targets or loss is NULL");
  collx_status_t st = check_targets(targets, n, vocab);
  if (st != COLLX_OK) return st;
  std::vector<float> row_max(n, -INFINITY), target_logit(n, 0.0f), sum_exp(n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < v_local; ++j) row_max[i] = std::max(row_max[i], logits[i * v_local + j]);
  st = collx_allreduce(row_max.data(), row_max.data(), n, COLLX_FLOAT32, COLLX_MAX, comm, nullptr);
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

void ce_bwd(const float* softmax, const int64_t* targets, const float* dloss, size_t n, size_t v_local,
            int64_t vocab_start, float* dlogits) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < v_local; ++j) {
      const float onehot = vocab_start + static_cast<int64_t>(j) == targets[i] ? 1.0f : 0.0f;
      dlogits[i * v_local + j] = (softmax[i * v_local + j] - onehot) * dloss[i];
    }
}

// ce_fwd's steps on device buffers (n > 0); the three all-reduces are the host path's.
collx_status_t ce_fwd_device(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t start,
                             int64_t vocab, float* loss, float* softmax, collx_comm_t comm) {
  const char* fn = "collx_tp_vocab_ce_fwd";
  std::vector<int64_t> host_targets(n);
  collx_status_t st = dev_copy(fn, host_targets.data(), targets, n * sizeof(int64_t), Dir::kDeviceToHost);
  if (st == COLLX_OK) st = dev_wait(fn);
  if (st == COLLX_OK) st = check_targets(host_targets.data(), n, vocab);
  if (st != COLLX_OK) return st;
  Workspace ws;
  char* w = nullptr;
  st = ws.acquire(fn, loss, 3 * n * sizeof(float), &w);
  if (st != COLLX_OK) return st;
  float* row_max = reinterpret_cast<float*>(w);
  float* target_logit = row_max + n;
  float* sum_exp = target_logit + n;
  const collx_opts_t o = stream_opts();
  auto allreduce = [&](float* v, collx_op_t op) {
    if (st != COLLX_OK) return;
    st = collx_allreduce(v, v, n, COLLX_FLOAT32, op, comm, &o);
    if (st != COLLX_OK) st = comm_fail(comm, st, fn);
  };
  st = dev_ce_row_max(fn, logits, n, v_local, row_max);
  allreduce(row_max, COLLX_MAX);
  if (st == COLLX_OK) st = dev_ce_target_sum_exp(fn, logits, targets, n, v_local, start, row_max, target_logit, sum_exp);
  allreduce(target_logit, COLLX_SUM);
  allreduce(sum_exp, COLLX_SUM);
  if (st == COLLX_OK) st = dev_ce_loss_softmax(fn, logits, n, v_local, row_max, target_logit, sum_exp, loss, softmax);
  const collx_status_t d = ws.done(fn);
  return st != COLLX_OK ? st : d;
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
    bool device = false;
    collx_status_t st = buffers_on_device("collx_tp_vocab_ce_fwd", {logits, targets, loss, softmax}, &device);
    if (st != COLLX_OK) return st;
    if (device && n)
      return ce_fwd_device(logits, targets, n, v_local, vocab_start, vocab, loss, softmax, tp_comm);
    return ce_fwd(logits, targets, n, v_local, vocab_start, vocab, loss, softmax, tp_comm);
  });
}

COLLX_API collx_status_t collx_tp_vocab_ce_bwd(const float* softmax, const int64_t* targets, const float* dloss,
                                               size_t n, size_t v_local, int64_t vocab_start, float* dlogits) {
  if (n && v_local && (!softmax || !targets || !dloss || !dlogits))
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_ce_bwd: a buffer is NULL");
  if (!n || !v_local) return COLLX_OK;
  return free_call("collx_tp_vocab_ce_bwd", [&] {
    bool device = false;
    collx_status_t st = buffers_on_device("collx_tp_vocab_ce_bwd", {softmax, targets, dloss, dlogits}, &device);
    if (st != COLLX_OK) return st;
    if (device) return dev_ce_backward("collx_tp_vocab_ce_bwd", softmax, targets, dloss, n, v_local, vocab_start, dlogits);
    ce_bwd(softmax, targets, dloss, n, v_local, vocab_start, dlogits);
    return COLLX_OK;
  });
}

}  // extern "C"
