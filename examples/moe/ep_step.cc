// The expert-parallel training step of collx-example-moe.
#include "examples/moe/ep_step.h"

#include <vector>

namespace moe {
namespace {

void check(collx_status_t st, const char* what, const char* msg) {
  if (st != COLLX_OK) throw Failure{std::string(what) + ": " + collx_status_string(st) + ": " + msg};
}

// Frees the plan on every path out of the step.
struct PlanGuard {
  collx_moe_plan_t plan = nullptr;
  ~PlanGuard() { collx_moe_plan_destroy(plan); }
};

}  // namespace

EpRank locate(collx_grid_t grid, collx_comm_t world) {
  EpRank r;
  r.world = world;
  collx_comm_rank(world, &r.world_rank);
  collx_comm_size(world, &r.world_size);
  check(collx_grid_comm(grid, COLLX_AXIS_DP, &r.dp), "collx_grid_comm(DP)", collx_grid_last_error(grid));
  check(collx_grid_comm(grid, COLLX_AXIS_EP, &r.ep), "collx_grid_comm(EP)", collx_grid_last_error(grid));
  check(collx_grid_comm(grid, COLLX_AXIS_EDP, &r.edp), "collx_grid_comm(EDP)", collx_grid_last_error(grid));
  collx_comm_rank(r.ep, &r.ep_rank);
  collx_comm_size(r.ep, &r.ep_size);
  r.local_experts = kExperts / r.ep_size;
  r.first_expert = r.ep_rank * r.local_experts;
  return r;
}

double ep_step(const EpRank& r, Params* w, int step, std::vector<size_t>* rows_out) {
  const size_t N = kTokensPerRank, k = kTopK, D = kDim;
  const double global_tokens = static_cast<double>(N) * r.world_size;
  std::vector<double> x(N * D), y(N * D), h(N * D), p(N * kExperts), gates(N * k);
  std::vector<int32_t> idx(N * k);
  for (size_t t = 0; t < N; ++t) {
    sample(step, static_cast<size_t>(r.world_rank) * N + t, &x[t * D], &y[t * D]);
    dense_router_forward(*w, &x[t * D], &h[t * D], &p[t * kExperts], &idx[t * k], &gates[t * k]);
  }
  std::vector<float> gates_f(gates.begin(), gates.end());  // exact: already rounded to float

  collx_moe_config_t cfg;
  collx_moe_config_init(&cfg, sizeof cfg);
  cfg.num_experts = kExperts;
  cfg.top_k = kTopK;
  cfg.timeout_ms = 60000;
  PlanGuard g;
  check(collx_moe_plan_create(r.ep, &cfg, idx.data(), N, &g.plan), "collx_moe_plan_create", collx_moe_last_error(nullptr));
  size_t R = 0;
  std::vector<size_t> rows(static_cast<size_t>(r.local_experts));
  collx_moe_plan_recv(g.plan, &R, rows.data());
  if (rows_out) *rows_out = rows;

  // Forward: h -> experts -> weighted sum.
  std::vector<double> expert_in(R * D), expert_out(R * D), out(N * D), copies(N * k * D);
  check(collx_moe_dispatch(g.plan, h.data(), nullptr, expert_in.data(), D, COLLX_FLOAT64), "collx_moe_dispatch",
        collx_moe_last_error(g.plan));
  std::vector<int32_t> row_expert;  // local expert of each received row
  for (int32_t e = 0; e < r.local_experts; ++e) row_expert.insert(row_expert.end(), rows[static_cast<size_t>(e)], e);
  for (size_t i = 0; i < R; ++i)
    expert_forward(w->experts[static_cast<size_t>(r.first_expert + row_expert[i])], &expert_in[i * D], &expert_out[i * D]);
  check(collx_moe_combine(g.plan, expert_out.data(), gates_f.data(), out.data(), copies.data(), D, COLLX_FLOAT64),
        "collx_moe_combine", collx_moe_last_error(g.plan));

  // Loss and its gradient (mean over the global batch).
  double loss = 0;
  std::vector<double> dout(N * D), dgates(N * k, 0.0);
  for (size_t i = 0; i < N * D; ++i) {
    loss += 0.5 * (out[i] - y[i]) * (out[i] - y[i]) / global_tokens;
    dout[i] = (out[i] - y[i]) / global_tokens;
  }
  for (size_t c = 0; c < N * k; ++c)
    for (size_t i = 0; i < D; ++i) dgates[c] += dout[(c / k) * D + i] * copies[c * D + i];

  // Backward through combine (= dispatch with the gates), the experts, dispatch (= combine).
  Params grad = zero_like(*w);
  std::vector<double> dexp(R * D), din(R * D), dh(N * D);
  check(collx_moe_dispatch(g.plan, dout.data(), gates_f.data(), dexp.data(), D, COLLX_FLOAT64), "collx_moe_dispatch (backward)",
        collx_moe_last_error(g.plan));
  for (size_t i = 0; i < R; ++i) {
    const size_t e = static_cast<size_t>(r.first_expert + row_expert[i]);
    expert_backward(w->experts[e], &expert_in[i * D], &dexp[i * D], &grad.experts[e], &din[i * D]);
  }
  check(collx_moe_combine(g.plan, din.data(), nullptr, dh.data(), nullptr, D, COLLX_FLOAT64), "collx_moe_combine (backward)",
        collx_moe_last_error(g.plan));
  for (size_t t = 0; t < N; ++t)
    dense_router_backward(*w, &x[t * D], &h[t * D], &p[t * kExperts], &idx[t * k], &dgates[t * k], &dh[t * D], &grad);

  // Dense gradients: sum over DP (each rank's share is already divided by the global batch).
  // Expert gradients: sum over the expert-data-parallel group only, never over DP.
  check(collx_allreduce(grad.w_in.data(), grad.w_in.data(), grad.w_in.size(), COLLX_FLOAT64, COLLX_SUM, r.dp, nullptr),
        "collx_allreduce(W_in, DP)", collx_last_error(r.dp));
  check(collx_allreduce(grad.w_router.data(), grad.w_router.data(), grad.w_router.size(), COLLX_FLOAT64, COLLX_SUM, r.dp,
                        nullptr),
        "collx_allreduce(W_router, DP)", collx_last_error(r.dp));
  for (int32_t e = 0; e < kExperts; ++e) {
    std::vector<double>& ge = grad.experts[static_cast<size_t>(e)];
    if (e < r.first_expert || e >= r.first_expert + r.local_experts) {
      ge.clear();  // not held here: sgd leaves it alone
      continue;
    }
    check(collx_allreduce(ge.data(), ge.data(), ge.size(), COLLX_FLOAT64, COLLX_SUM, r.edp, nullptr),
          "collx_allreduce(expert, EDP)", collx_last_error(r.edp));
  }
  sgd(w, grad);
  check(collx_allreduce(&loss, &loss, 1, COLLX_FLOAT64, COLLX_SUM, r.world, nullptr), "collx_allreduce(loss)",
        collx_last_error(r.world));
  return loss;
}

}  // namespace moe
