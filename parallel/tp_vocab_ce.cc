// Vocab-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy): each TP rank holds
// a block of vocabulary columns; three all-reduces of one float per row give the global
// max, the target logit and the softmax denominator; the backward is local.
//
// Device buffers are staged through pinned host memory and computed by the host code below
// (so device and host results are the same bits; a GPU's expf/logf round differently): the
// inputs are copied out on the thread's parallel stream, the host waits for them, computes,
// queues the copies of the results back and waits for those before it frees the staging.
#include <cmath>
#include <vector>

#include "parallel/device_buffers.h"
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

void ce_bwd(const float* softmax, const int64_t* targets, const float* dloss, size_t n, size_t v_local,
            int64_t vocab_start, float* dlogits) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < v_local; ++j) {
      const float onehot = vocab_start + static_cast<int64_t>(j) == targets[i] ? 1.0f : 0.0f;
      dlogits[i * v_local + j] = (softmax[i * v_local + j] - onehot) * dloss[i];
    }
}

// Pinned host copies of a call's device buffers: in() queues a copy out of the device,
// out() a copy back; ready() waits for the copies out. Staging's destructor waits for the
// copies back before it frees the memory.
class Staging {
 public:
  explicit Staging(const char* fn) : fn_(fn) {}
  // Room for every buffer (8-byte aligned each); call once with the total.
  collx_status_t alloc(size_t bytes) { return host_.alloc(fn_, bytes); }
  static size_t room(size_t bytes) { return (bytes + 7) / 8 * 8; }
  template <typename T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(host_.get() + used_);
    used_ += room(count * sizeof(T));
    return p;
  }
  collx_status_t in(void* host, const void* device, size_t bytes) {
    return bytes ? dev_copy(fn_, host, device, bytes, Dir::kDeviceToHost) : COLLX_OK;
  }
  collx_status_t ready() { return dev_wait(fn_); }
  collx_status_t out(void* device, const void* host, size_t bytes) {
    return bytes ? dev_copy(fn_, device, host, bytes, Dir::kHostToDevice) : COLLX_OK;
  }

 private:
  const char* fn_;
  Scratch host_{Scratch::kPinnedHost};
  size_t used_ = 0;
};

collx_status_t ce_fwd_device(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t start,
                             int64_t vocab, float* loss, float* softmax, collx_comm_t comm) {
  Staging h("collx_tp_vocab_ce_fwd");
  const size_t nl = n * v_local;
  collx_status_t st = h.alloc(Staging::room(n * 8) + Staging::room(n * 4) + Staging::room(nl * 4) * (softmax ? 2 : 1));
  if (st != COLLX_OK) return st;
  int64_t* h_targets = h.take<int64_t>(n);
  float* h_loss = h.take<float>(n);
  float* h_logits = h.take<float>(nl);
  float* h_softmax = softmax ? h.take<float>(nl) : nullptr;
  if (st == COLLX_OK) st = h.in(h_targets, targets, n * 8);
  if (st == COLLX_OK) st = h.in(h_logits, logits, nl * 4);
  if (st == COLLX_OK) st = h.ready();
  if (st == COLLX_OK) st = ce_fwd(h_logits, h_targets, n, v_local, start, vocab, h_loss, h_softmax, comm);
  if (st == COLLX_OK) st = h.out(loss, h_loss, n * 4);
  if (st == COLLX_OK && softmax) st = h.out(softmax, h_softmax, nl * 4);
  return st;
}

collx_status_t ce_bwd_device(const float* softmax, const int64_t* targets, const float* dloss, size_t n,
                             size_t v_local, int64_t vocab_start, float* dlogits) {
  Staging h("collx_tp_vocab_ce_bwd");
  const size_t nl = n * v_local;
  collx_status_t st = h.alloc(Staging::room(n * 8) + Staging::room(n * 4) + Staging::room(nl * 4) * 2);
  if (st != COLLX_OK) return st;
  int64_t* h_targets = h.take<int64_t>(n);
  float* h_dloss = h.take<float>(n);
  float* h_softmax = h.take<float>(nl);
  float* h_dlogits = h.take<float>(nl);
  st = h.in(h_targets, targets, n * 8);
  if (st == COLLX_OK) st = h.in(h_dloss, dloss, n * 4);
  if (st == COLLX_OK) st = h.in(h_softmax, softmax, nl * 4);
  if (st == COLLX_OK) st = h.ready();
  if (st != COLLX_OK) return st;
  ce_bwd(h_softmax, h_targets, h_dloss, n, v_local, vocab_start, h_dlogits);
  return h.out(dlogits, h_dlogits, nl * 4);
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
    if (device) return ce_bwd_device(softmax, targets, dloss, n, v_local, vocab_start, dlogits);
    ce_bwd(softmax, targets, dloss, n, v_local, vocab_start, dlogits);
    return COLLX_OK;
  });
}

}  // extern "C"
