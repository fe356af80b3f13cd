// MoE dispatch and combine: rows permuted into send order (scaled), exchanged with the
// EP ranks by an all-to-allv, reordered by local expert; and the way back, weighted and
// summed over the top-k copies.
#include <algorithm>

#include "parallel/moe_internal.h"

namespace collx {
namespace parallel {
namespace {

constexpr const char* kDispatch = "collx_moe_dispatch";
constexpr const char* kCombine = "collx_moe_combine";

// Moves rows: send_rows[r] rows of `send` go to rank r, recv_rows[r] rows arrive from
// rank r, packed in rank order on both sides.
collx_status_t exchange_rows(collx_moe_plan_t plan, const char* fn, const void* send,
                             const std::vector<size_t>& send_rows, void* recv,
                             const std::vector<size_t>& recv_rows, size_t row_bytes) {
  const size_t n = static_cast<size_t>(plan->ep);
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t so = 0, ro = 0;
  for (size_t r = 0; r < n; ++r) {
    sc[r] = send_rows[r] * row_bytes;
    sd[r] = so;
    so += sc[r];
    rc[r] = recv_rows[r] * row_bytes;
    rd[r] = ro;
    ro += rc[r];
  }
  // Non-NULL buffers even when nothing moves.
  unsigned char empty_send = 0, empty_recv = 0;
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.timeout_ms = plan->timeout_ms;
  collx_status_t st = collx_alltoallv(so ? send : &empty_send, sc.data(), sd.data(), ro ? recv : &empty_recv, rc.data(),
                                      rd.data(), COLLX_UINT8, plan->comm, &opts);
  if (st != COLLX_OK)
    return moe_fail(plan, st, fn, std::string("all-to-allv on the EP communicator failed: ") + collx_last_error(plan->comm));
  return COLLX_OK;
}

template <typename T>
void pack_rows(const collx_moe_plan_s& p, const T* tokens, const float* scale, T* send, size_t hidden) {
  const size_t k = static_cast<size_t>(p.top_k);
  for (size_t i = 0; i < p.send_copy.size(); ++i) {
    const size_t c = p.send_copy[i];
    const T* src = tokens + (c / k) * hidden;
    T* dst = send + i * hidden;
    if (scale) {
      const T s = static_cast<T>(scale[c]);
      for (size_t h = 0; h < hidden; ++h) dst[h] = src[h] * s;
    } else {
      std::copy(src, src + hidden, dst);
    }
  }
}

template <typename T>
void reduce_copies(const collx_moe_plan_s& p, const T* back, const float* weights, T* out, T* copies, size_t hidden) {
  const size_t k = static_cast<size_t>(p.top_k);
  for (size_t t = 0; t < p.num_tokens; ++t) {
    T* o = out + t * hidden;
    std::fill(o, o + hidden, T(0));
    for (size_t j = 0; j < k; ++j) {
      const size_t c = t * k + j;
      const T* row = back + p.copy_row[c] * hidden;
      if (copies) std::copy(row, row + hidden, copies + c * hidden);
      const T w = weights ? static_cast<T>(weights[c]) : T(1);
      for (size_t h = 0; h < hidden; ++h) o[h] += w * row[h];
    }
  }
}

// Checks the buffers and datatype, then runs run(float{}) or run(double{}) with exceptions
// turned into status codes.
template <typename Run>
collx_status_t checked_call(collx_moe_plan_t p, const char* fn, const void* in, size_t in_rows, const void* out,
                            size_t out_rows, size_t hidden, collx_datatype_t dt, Run&& run) {
  std::string why;
  if (dt != COLLX_FLOAT32 && dt != COLLX_FLOAT64)
    why = "datatype " + std::to_string(static_cast<int>(dt)) + " is not supported (COLLX_FLOAT32 or COLLX_FLOAT64)";
  else if (hidden == 0)
    why = "hidden is 0";
  else if (!in && in_rows)
    why = "the input buffer is NULL but holds " + std::to_string(in_rows) + " rows";
  else if (!out && out_rows)
    why = "the output buffer is NULL but holds " + std::to_string(out_rows) + " rows";
  if (!why.empty()) return moe_fail(p, COLLX_ERR_INVALID_ARG, fn, why);
  return guarded([&] { return dt == COLLX_FLOAT32 ? run(float{}) : run(double{}); },
                 [&](const std::string& m) { moe_fail(p, COLLX_OK, fn, m); });
}

template <typename T>
collx_status_t dispatch_t(collx_moe_plan_t p, const void* tokens, const float* scale, void* expert_in, size_t hidden) {
  std::vector<T> send(p->send_copy.size() * hidden), arrival(p->num_recv * hidden);
  pack_rows(*p, static_cast<const T*>(tokens), scale, send.data(), hidden);
  collx_status_t st = exchange_rows(p, kDispatch, send.data(), p->send_rows, arrival.data(), p->recv_rows, hidden * sizeof(T));
  if (st != COLLX_OK) return st;
  T* dst = static_cast<T*>(expert_in);
  for (size_t a = 0; a < p->num_recv; ++a)
    std::copy(&arrival[a * hidden], &arrival[a * hidden] + hidden, dst + p->arrival_to_expert[a] * hidden);
  return COLLX_OK;
}

template <typename T>
collx_status_t combine_t(collx_moe_plan_t p, const void* expert_out, const float* weights, void* out, void* copies,
                         size_t hidden) {
  std::vector<T> arrival(p->num_recv * hidden), back(p->send_copy.size() * hidden);
  const T* src = static_cast<const T*>(expert_out);
  for (size_t a = 0; a < p->num_recv; ++a)
    std::copy(src + p->arrival_to_expert[a] * hidden, src + (p->arrival_to_expert[a] + 1) * hidden, &arrival[a * hidden]);
  collx_status_t st = exchange_rows(p, kCombine, arrival.data(), p->recv_rows, back.data(), p->send_rows, hidden * sizeof(T));
  if (st != COLLX_OK) return st;
  reduce_copies(*p, back.data(), weights, static_cast<T*>(out), static_cast<T*>(copies), hidden);
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using collx::parallel::moe_fail;

extern "C" {

COLLX_API collx_status_t collx_moe_dispatch(collx_moe_plan_t plan, const void* tokens, const float* scale,
                                            void* expert_in, size_t hidden, collx_datatype_t datatype) {
  using collx::parallel::kDispatch;
  if (!plan) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kDispatch, "plan is NULL");
  return collx::parallel::checked_call(plan, kDispatch, tokens, plan->num_tokens, expert_in, plan->num_recv, hidden,
                                       datatype, [&](auto type) {
                                         using T = decltype(type);
                                         return collx::parallel::dispatch_t<T>(plan, tokens, scale, expert_in, hidden);
                                       });
}

COLLX_API collx_status_t collx_moe_combine(collx_moe_plan_t plan, const void* expert_out, const float* weights,
                                           void* out, void* copies, size_t hidden, collx_datatype_t datatype) {
  using collx::parallel::kCombine;
  if (!plan) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCombine, "plan is NULL");
  return collx::parallel::checked_call(plan, kCombine, expert_out, plan->num_recv, out, plan->num_tokens, hidden,
                                       datatype, [&](auto type) {
                                         using T = decltype(type);
                                         return collx::parallel::combine_t<T>(plan, expert_out, weights, out, copies,
                                                                              hidden);
                                       });
}

}  // extern "C"
