// The interleaved 1F1B schedule (virtual pipeline stages) of Megatron-Core's
// forward_backward_pipelining_with_interleaving, with its point-to-point batches: the
// computes in Megatron's order, each batch of transfers placed in the exchange of the step
// after it. Pure index math; the ring exchange itself is collx_pp_exchange_ring (pp.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "parallel/free_calls.h"

namespace collx {
namespace parallel {
namespace {

constexpr collx_pp_ref_t kNone = {-1, -1};

bool empty(const collx_pp_ref_t& r) { return r.microbatch < 0; }

// Python's modulo (never negative): Megatron looks back before forward/backward 0.
int64_t floor_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

class Interleaved {
 public:
  Interleaved(int32_t p, int32_t r, int32_t v, int32_t m)
      : p_(p), r_(r), v_(v), m_(m), total_(static_cast<int64_t>(m) * v), recv_fwd_(v, 0), recv_bwd_(v, 0) {}

  std::vector<collx_pp_step_t> build() {
    const bool all_warmup = m_ == p_;
    int64_t warmup = total_;
    if (!all_warmup)
      warmup = std::min<int64_t>(static_cast<int64_t>(p_ - r_ - 1) * 2 + static_cast<int64_t>(v_ - 1) * p_, total_);
    const int64_t remaining = total_ - warmup;

    // recv_forward of the first input (stage 0 reads its data instead).
    if (r_ != 0) pending_.recv_prev = take_fwd(0);
    for (int64_t k = 0; k < warmup; ++k) {
      compute(COLLX_PP_FORWARD, k);
      const int32_t next_chunk = chunk_of(k + 1, true);
      const bool recv_prev = !(r_ == 0 && next_chunk == 0) && k != total_ - 1;
      Batch b;
      b.send_next = output_of(k);
      if (recv_prev) b.recv_prev = take_fwd(next_chunk);
      if (k == warmup - 1 && !all_warmup && r_ != p_ - 1) b.recv_next = take_bwd(v_ - 1);
      exchange(b);
    }
    for (int64_t k = 0; k < remaining; ++k) {
      const int64_t fk = k + warmup, bk = k;
      compute(COLLX_PP_FORWARD, fk);
      compute(COLLX_PP_BACKWARD, bk);
      Batch b;
      b.send_next = output_of(fk);
      b.send_prev = input_grad_of(bk);
      bool recv_prev = true, recv_next = true;
      int32_t next_fwd_chunk, next_bwd_chunk;
      if (r_ == 0) {  // its next input comes from the last stage's previous chunk
        next_fwd_chunk = chunk_of(fk - (p_ - 1), true);
        if (next_fwd_chunk == v_ - 1) recv_prev = false;
        ++next_fwd_chunk;
      } else {
        next_fwd_chunk = chunk_of(fk + 1, true);
      }
      if (r_ == p_ - 1) {  // its next output gradient comes from the first stage's next chunk
        next_bwd_chunk = chunk_of(bk - (p_ - 1), false);
        if (next_bwd_chunk == 0) recv_next = false;
        --next_bwd_chunk;
      } else {
        next_bwd_chunk = chunk_of(bk + 1, false);
      }
      if (k == remaining - 1) recv_prev = false;
      if (recv_prev) b.recv_prev = take_fwd(next_fwd_chunk);
      if (recv_next) b.recv_next = take_bwd(next_bwd_chunk);
      exchange(b);
    }
    if (all_warmup && r_ != p_ - 1) {  // recv_backward before the cool-down
      Batch b;
      b.recv_next = take_bwd(v_ - 1);
      exchange(b);
    }
    for (int64_t k = remaining; k < total_; ++k) {
      compute(COLLX_PP_BACKWARD, k);
      const int32_t next_chunk = chunk_of(k + 1, false);
      const bool recv_next = !(r_ == p_ - 1 && next_chunk == v_ - 1) && k != total_ - 1;
      Batch b;
      b.send_prev = input_grad_of(k);
      if (recv_next) b.recv_next = take_bwd(next_chunk);
      exchange(b);
    }
    if (!pending_.idle()) steps_.push_back(step(COLLX_PP_EXCHANGE_ONLY, -1, -1, 0));
    return steps_;
  }

 private:
  struct Batch {
    collx_pp_ref_t send_next = kNone, recv_prev = kNone, send_prev = kNone, recv_next = kNone;
    bool idle() const { return empty(send_next) && empty(recv_prev) && empty(send_prev) && empty(recv_next); }
  };

  // Megatron's get_model_chunk_id and get_microbatch_id_in_model_chunk.
  int32_t chunk_of(int64_t k, bool forward) const {
    const int32_t c = static_cast<int32_t>(floor_mod(k, static_cast<int64_t>(p_) * v_) / p_);
    return forward ? c : v_ - 1 - c;
  }
  int32_t microbatch_of(int64_t k) const {
    return static_cast<int32_t>((k / (static_cast<int64_t>(p_) * v_)) * p_ + k % p_);
  }

  // What a forward sends on (nothing from the model's last virtual stage), and what a
  // backward sends back (nothing from the first).
  collx_pp_ref_t output_of(int64_t k) const {
    const int32_t c = chunk_of(k, true);
    if (r_ == p_ - 1 && c == v_ - 1) return kNone;
    return {microbatch_of(k), c};
  }
  collx_pp_ref_t input_grad_of(int64_t k) const {
    const int32_t c = chunk_of(k, false);
    if (r_ == 0 && c == 0) return kNone;
    return {microbatch_of(k), c};
  }
  // Receives land in per-chunk queues, in micro-batch order (every chunk runs its
  // micro-batches in order), so the n-th one of a chunk is micro-batch n.
  collx_pp_ref_t take_fwd(int32_t chunk) { return {recv_fwd_[static_cast<size_t>(chunk)]++, chunk}; }
  collx_pp_ref_t take_bwd(int32_t chunk) { return {recv_bwd_[static_cast<size_t>(chunk)]++, chunk}; }

  collx_pp_step_t step(int32_t kind, int32_t mb, int32_t chunk, int32_t last) {
    collx_pp_step_t s{
        kind, mb, chunk, last, pending_.send_next, pending_.recv_prev, pending_.send_prev, pending_.recv_next};
    pending_ = Batch{};
    return s;
  }

  void compute(int32_t kind, int64_t k) {
    const bool fwd = kind == COLLX_PP_FORWARD;
    const int32_t mb = microbatch_of(k);
    steps_.push_back(step(kind, mb, chunk_of(k, fwd), !fwd && mb == m_ - 1 ? 1 : 0));
  }

  // Batches with no compute between them share one exchange when their slots allow (all
  // transfers of both are then posted before the wait: never more blocking); otherwise the
  // earlier one becomes an exchange-only step.
  void exchange(const Batch& b) {
    auto fits = [](const collx_pp_ref_t& have, const collx_pp_ref_t& add) { return empty(have) || empty(add); };
    if (!(fits(pending_.send_next, b.send_next) && fits(pending_.recv_prev, b.recv_prev) &&
          fits(pending_.send_prev, b.send_prev) && fits(pending_.recv_next, b.recv_next)))
      steps_.push_back(step(COLLX_PP_EXCHANGE_ONLY, -1, -1, 0));
    auto merge = [](collx_pp_ref_t& have, const collx_pp_ref_t& add) {
      if (!empty(add)) have = add;
    };
    merge(pending_.send_next, b.send_next);
    merge(pending_.recv_prev, b.recv_prev);
    merge(pending_.send_prev, b.send_prev);
    merge(pending_.recv_next, b.recv_next);
  }

  const int32_t p_, r_, v_, m_;
  const int64_t total_;
  std::vector<int32_t> recv_fwd_, recv_bwd_;
  Batch pending_;
  std::vector<collx_pp_step_t> steps_;
};

std::string invalid_interleaved(int32_t p, int32_t r, int32_t v, int32_t m) {
  const std::string fn = "collx_pp_schedule_interleaved: ";
  if (p < 2) return fn + "pp_size " + std::to_string(p) + " < 2; the interleaved schedule needs at least 2 stages";
  if (r < 0 || r >= p) return fn + "pp_rank " + std::to_string(r) + " is outside [0, " + std::to_string(p) + ")";
  if (v < 1) return fn + "virtual_stages " + std::to_string(v) + " < 1";
  if (m < 1) return fn + "microbatches " + std::to_string(m) + " < 1";
  if (m % p != 0)
    return fn + "microbatches " + std::to_string(m) + " is not a multiple of pp_size " + std::to_string(p) +
           " (Megatron's interleaved schedule runs micro-batches in groups of pp_size)";
  if (static_cast<int64_t>(m) * v > (int64_t{1} << 30))
    return fn + "microbatches * virtual_stages = " + std::to_string(static_cast<int64_t>(m) * v) + " is too large";
  return "";
}

}  // namespace
}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_pp_schedule_interleaved(int32_t pp_size, int32_t pp_rank, int32_t virtual_stages,
                                                       int32_t microbatches, collx_pp_step_t* steps, size_t cap,
                                                       size_t* n) {
  using namespace collx::parallel;
  return free_call("collx_pp_schedule_interleaved", [&]() -> collx_status_t {
    if (!n) return free_fail(COLLX_ERR_INVALID_ARG, "collx_pp_schedule_interleaved: n (output) is NULL");
    const std::string bad = invalid_interleaved(pp_size, pp_rank, virtual_stages, microbatches);
    if (!bad.empty()) return free_fail(COLLX_ERR_INVALID_ARG, bad);
    if (!steps && cap) return free_fail(COLLX_ERR_INVALID_ARG, "collx_pp_schedule_interleaved: steps is NULL, cap > 0");
    const std::vector<collx_pp_step_t> out = Interleaved(pp_size, pp_rank, virtual_stages, microbatches).build();
    *n = out.size();
    for (size_t i = 0; i < out.size() && i < cap; ++i) steps[i] = out[i];
    return COLLX_OK;
  });
}

}  // extern "C"
