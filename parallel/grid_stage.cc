// Communicators of chosen pipeline stages (the tied-embedding group): one split of the
// grid's world, coloured by the rank's PP group, keyed by its stage.
#include <algorithm>
#include <vector>

#include "parallel/dp_internal.h"

namespace collx {
namespace parallel {
namespace {

collx_status_t stage_fail(collx_grid_t g, collx_status_t st, const std::string& msg) {
  g->error.set("collx_grid_stage_comm: " + msg);
  return st;
}

collx_status_t stage_comm(collx_grid_t g, const int32_t* stages, size_t n, collx_comm_t* out) {
  *out = nullptr;
  const int32_t pp = g->dims[COLLX_DIM_PP];
  if (!stages && n) return stage_fail(g, COLLX_ERR_INVALID_ARG, "stages is NULL");
  std::vector<int32_t> v(stages, stages + n);
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= pp)
      return stage_fail(g, COLLX_ERR_INVALID_ARG, "stage " + std::to_string(v[i]) + " is outside [0, " +
                                                      std::to_string(pp) + ")");
    if (i && v[i] == v[i - 1])
      return stage_fail(g, COLLX_ERR_INVALID_ARG, "stage " + std::to_string(v[i]) + " is listed twice");
  }
  const int32_t my_stage = (g->rank / g->stride[COLLX_DIM_PP]) % pp;
  // The PP group is identified by the rank with the stage coordinate removed.
  const int32_t group = g->rank - my_stage * g->stride[COLLX_DIM_PP];
  const bool member = std::binary_search(v.begin(), v.end(), my_stage);
  collx_status_t st = collx_comm_split(g->world, member ? group : COLLX_SPLIT_NOCOLOR, my_stage, out);
  if (st != COLLX_OK) return stage_fail(g, st, comm_error(g->world, st));
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_grid_stage_comm(collx_grid_t grid, const int32_t* stages, size_t n,
                                               collx_comm_t* comm) {
  if (!grid) return collx::parallel::refuse_arg(grid, "collx_grid_stage_comm", "grid is NULL");
  if (!comm) return collx::parallel::stage_fail(grid, COLLX_ERR_INVALID_ARG, "comm (output) is NULL");
  return collx::parallel::guarded([&] { return collx::parallel::stage_comm(grid, stages, n, comm); },
                                  [&](const std::string& m) { grid->error.set("collx_grid_stage_comm: " + m); });
}

}  // extern "C"
