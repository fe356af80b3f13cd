// MoE routing plan: the configs checked across the EP ranks, the per-expert copy counts
// exchanged (all-to-all), and the send and receive permutations derived from them.
#include <algorithm>
#include <memory>
#include <numeric>

#include "parallel/moe_internal.h"

namespace collx {
namespace parallel {

collx_status_t moe_fail(collx_moe_plan_t plan, collx_status_t st, const char* fn, const std::string& msg) {
  const std::string m = std::string(fn) + ": " + msg;
  thread_error() = m;
  if (plan) plan->error.set(m);
  return st;
}

namespace {

constexpr const char* kCreate = "collx_moe_plan_create";
// num_experts, top_k, first bad copy + 1 (0 = none), its expert id, 1 = other bad arguments
constexpr size_t kRecordWords = 5;

// Index of the first copy whose expert id is outside [0, E), or n.
size_t first_bad_copy(const int32_t* idx, size_t n, int32_t experts) {
  for (size_t c = 0; c < n; ++c)
    if (idx[c] < 0 || idx[c] >= experts) return c;
  return n;
}

// Every rank checks every rank's record the same way, so all return the same error.
collx_status_t check_records(const std::vector<uint64_t>& all, int32_t ep, int32_t top_k_here, std::string* why) {
  const int64_t e0 = static_cast<int64_t>(all[0]), k0 = static_cast<int64_t>(all[1]);
  for (int32_t r = 0; r < ep; ++r) {
    const uint64_t* rec = &all[kRecordWords * static_cast<size_t>(r)];
    if (static_cast<int64_t>(rec[0]) != e0 || static_cast<int64_t>(rec[1]) != k0) {
      *why = "rank " + std::to_string(r) + " passed num_experts=" + std::to_string(static_cast<int64_t>(rec[0])) +
             ", top_k=" + std::to_string(static_cast<int64_t>(rec[1])) + " but rank 0 passed num_experts=" +
             std::to_string(e0) + ", top_k=" + std::to_string(k0) + " (every EP rank must pass the same config)";
      return COLLX_ERR_MISMATCH;
    }
  }
  for (int32_t r = 0; r < ep; ++r) {
    const uint64_t* rec = &all[kRecordWords * static_cast<size_t>(r)];
    if (rec[4] != 0) {
      *why = "rank " + std::to_string(r) + " passed invalid arguments (collx_moe_last_error there names them)";
      return COLLX_ERR_INVALID_ARG;
    }
    if (rec[2] != 0) {
      const uint64_t c = rec[2] - 1;
      *why = "rank " + std::to_string(r) + " routed token " + std::to_string(c / static_cast<uint64_t>(top_k_here)) +
             " slot " + std::to_string(c % static_cast<uint64_t>(top_k_here)) + " to expert " +
             std::to_string(static_cast<int32_t>(rec[3])) + ", outside [0, " + std::to_string(e0) + ")";
      return COLLX_ERR_INVALID_ARG;
    }
  }
  return COLLX_OK;
}

collx_status_t create(collx_comm_t comm, const collx_moe_config_t* cfg, const int32_t* idx, size_t num_tokens,
                      collx_moe_plan_t* out) {
  if (!out) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCreate, "plan (output) is NULL");
  *out = nullptr;
  if (!comm) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCreate, "ep_comm is NULL");
  if (!cfg) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCreate, "config is NULL");
  if (cfg->size < sizeof(collx_moe_config_t))
    return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCreate,
                    "config->size is " + std::to_string(cfg->size) + ", expected " +
                        std::to_string(sizeof(collx_moe_config_t)) + " (call collx_moe_config_init)");
  int32_t ep = 0, rank = 0;
  collx_status_t st = collx_comm_size(comm, &ep);
  if (st == COLLX_OK) st = collx_comm_rank(comm, &rank);
  if (st != COLLX_OK) return moe_fail(nullptr, st, kCreate, std::string("ep_comm: ") + collx_last_error(comm));
  // Local checks that every rank makes identically (same config everywhere, checked below).
  std::string local;
  if (cfg->num_experts < 1 || cfg->num_experts % ep != 0)
    local = "num_experts is " + std::to_string(cfg->num_experts) + ", must be a positive multiple of the EP size " +
            std::to_string(ep);
  else if (cfg->top_k < 1 || cfg->top_k > cfg->num_experts)
    local = "top_k is " + std::to_string(cfg->top_k) + ", must be in [1, num_experts = " +
            std::to_string(cfg->num_experts) + "]";
  else if (!idx && num_tokens)
    local = "topk_idx is NULL with num_tokens = " + std::to_string(num_tokens);
  const size_t k = local.empty() ? static_cast<size_t>(cfg->top_k) : 1;
  const size_t copies = num_tokens * k;
  const size_t bad = local.empty() ? first_bad_copy(idx, copies, cfg->num_experts) : copies;

  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.timeout_ms = cfg->timeout_ms;
  const uint64_t mine[kRecordWords] = {static_cast<uint64_t>(static_cast<int64_t>(cfg->num_experts)),
                                       static_cast<uint64_t>(static_cast<int64_t>(cfg->top_k)),
                                       bad < copies ? bad + 1 : 0,
                                       bad < copies ? static_cast<uint64_t>(static_cast<uint32_t>(idx[bad])) : 0,
                                       local.empty() ? 0u : 1u};
  std::vector<uint64_t> all(kRecordWords * static_cast<size_t>(ep));
  st = collx_allgather(mine, all.data(), kRecordWords, COLLX_UINT64, comm, &opts);
  if (st != COLLX_OK)
    return moe_fail(nullptr, st, kCreate, std::string("allgather of the MoE configs failed: ") + collx_last_error(comm));
  std::string why;
  st = check_records(all, ep, cfg->top_k > 0 ? cfg->top_k : 1, &why);
  if (!local.empty()) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, kCreate, local);
  if (st != COLLX_OK) return moe_fail(nullptr, st, kCreate, why);

  auto plan = std::unique_ptr<collx_moe_plan_s>(new collx_moe_plan_s());
  plan->comm = comm;
  plan->ep = ep;
  plan->rank = rank;
  plan->num_experts = cfg->num_experts;
  plan->top_k = cfg->top_k;
  plan->local_experts = cfg->num_experts / ep;
  plan->timeout_ms = cfg->timeout_ms;
  plan->num_tokens = num_tokens;
  const size_t E = static_cast<size_t>(cfg->num_experts), L = static_cast<size_t>(plan->local_experts);
  // Send order: a stable counting sort of the copies by expert.
  std::vector<uint64_t> per_expert(E, 0);
  for (size_t c = 0; c < copies; ++c) ++per_expert[static_cast<size_t>(idx[c])];
  std::vector<size_t> start(E + 1, 0);
  for (size_t e = 0; e < E; ++e) start[e + 1] = start[e] + per_expert[e];
  plan->send_copy.resize(copies);
  plan->copy_row.resize(copies);
  for (size_t c = 0; c < copies; ++c) {
    const size_t row = start[static_cast<size_t>(idx[c])]++;
    plan->send_copy[row] = c;
    plan->copy_row[c] = row;
  }
  plan->send_rows.assign(static_cast<size_t>(ep), 0);
  for (size_t e = 0; e < E; ++e) plan->send_rows[e / L] += per_expert[e];
  // Per-expert counts to each expert's rank: block r of the all-to-all is rank r's L experts.
  std::vector<uint64_t> from(E, 0);
  st = collx_alltoall(per_expert.data(), from.data(), L, COLLX_UINT64, comm, &opts);
  if (st != COLLX_OK)
    return moe_fail(nullptr, st, kCreate, std::string("all-to-all of the expert counts failed: ") + collx_last_error(comm));
  // from[s*L + e]: rows rank s sends to local expert e. Arrival order (s, e); expert_in
  // order (e, s).
  plan->recv_rows.assign(static_cast<size_t>(ep), 0);
  plan->expert_rows.assign(L, 0);
  for (size_t s = 0; s < static_cast<size_t>(ep); ++s)
    for (size_t e = 0; e < L; ++e) {
      plan->recv_rows[s] += from[s * L + e];
      plan->expert_rows[e] += from[s * L + e];
    }
  plan->num_recv = std::accumulate(plan->recv_rows.begin(), plan->recv_rows.end(), size_t{0});
  std::vector<size_t> expert_pos(L, 0);  // next row of expert e in expert_in
  for (size_t e = 1; e < L; ++e) expert_pos[e] = expert_pos[e - 1] + plan->expert_rows[e - 1];
  std::vector<size_t> chunk_start(static_cast<size_t>(ep) * L);  // (s, e) -> first row in expert_in
  for (size_t e = 0; e < L; ++e)
    for (size_t s = 0; s < static_cast<size_t>(ep); ++s) {
      chunk_start[s * L + e] = expert_pos[e];
      expert_pos[e] += from[s * L + e];
    }
  plan->arrival_to_expert.resize(plan->num_recv);
  size_t a = 0;
  for (size_t s = 0; s < static_cast<size_t>(ep); ++s)
    for (size_t e = 0; e < L; ++e)
      for (uint64_t i = 0; i < from[s * L + e]; ++i) plan->arrival_to_expert[a++] = chunk_start[s * L + e] + i;
  *out = plan.release();
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using collx::parallel::guarded;
using collx::parallel::moe_fail;

extern "C" {

COLLX_API collx_status_t collx_moe_config_init(collx_moe_config_t* config, size_t size) {
  if (!config || size < sizeof(size_t))
    return collx::parallel::refuse_arg(nullptr, "collx_moe_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  collx_moe_config_t c;
  c.size = size < sizeof(c) ? size : sizeof(c);
  c.num_experts = 0;
  c.top_k = 1;
  c.timeout_ms = -1;
  std::memcpy(config, &c, c.size);
  config->size = size;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_moe_plan_create(collx_comm_t ep_comm, const collx_moe_config_t* config,
                                               const int32_t* topk_idx, size_t num_tokens,
                                               collx_moe_plan_t* plan) {
  return guarded([&] { return collx::parallel::create(ep_comm, config, topk_idx, num_tokens, plan); },
                 [](const std::string& m) { collx::parallel::thread_error() = "collx_moe_plan_create: " + m; });
}

COLLX_API collx_status_t collx_moe_plan_destroy(collx_moe_plan_t plan) {
  delete plan;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_moe_plan_recv(collx_moe_plan_t plan, size_t* num_recv, size_t* expert_counts) {
  if (!plan) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, "collx_moe_plan_recv", "plan is NULL");
  if (num_recv) *num_recv = plan->num_recv;
  if (expert_counts) std::copy(plan->expert_rows.begin(), plan->expert_rows.end(), expert_counts);
  return COLLX_OK;
}

COLLX_API collx_status_t collx_moe_plan_splits(collx_moe_plan_t plan, size_t* send_counts, size_t* recv_counts) {
  if (!plan) return moe_fail(nullptr, COLLX_ERR_INVALID_ARG, "collx_moe_plan_splits", "plan is NULL");
  if (send_counts) std::copy(plan->send_rows.begin(), plan->send_rows.end(), send_counts);
  if (recv_counts) std::copy(plan->recv_rows.begin(), plan->recv_rows.end(), recv_counts);
  return COLLX_OK;
}

COLLX_API const char* collx_moe_last_error(collx_moe_plan_t plan) {
  if (!plan) return collx::parallel::thread_error().c_str();
  return plan->error.get();
}

}  // extern "C"
