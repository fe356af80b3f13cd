// The grid's expert layout: expert parallelism carved out of each DP|CP group (Megatron-
// Core's expert rank generator for its orders), the expert coordinates and their inverse.
#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

namespace {

// Index of the rank in its DP|CP group (that group ordered by world rank) and back.
int32_t folded_index(const collx_grid_s* g, const int32_t c[COLLX_GRID_NUM_DIMS]) {
  const int32_t cp = g->dims[COLLX_DIM_CP], dp = g->dims[COLLX_DIM_DP];
  return g->stride[COLLX_DIM_CP] <= g->stride[COLLX_DIM_DP] ? c[COLLX_DIM_CP] + c[COLLX_DIM_DP] * cp
                                                            : c[COLLX_DIM_DP] + c[COLLX_DIM_CP] * dp;
}

void unfold_index(const collx_grid_s* g, int32_t f, int32_t c[COLLX_GRID_NUM_DIMS]) {
  const int32_t cp = g->dims[COLLX_DIM_CP], dp = g->dims[COLLX_DIM_DP];
  if (g->stride[COLLX_DIM_CP] <= g->stride[COLLX_DIM_DP]) {
    c[COLLX_DIM_CP] = f % cp;
    c[COLLX_DIM_DP] = f / cp;
  } else {
    c[COLLX_DIM_DP] = f % dp;
    c[COLLX_DIM_CP] = f / dp;
  }
}

}  // namespace

void mixed_radix_coords(const int32_t dims[COLLX_GRID_NUM_DIMS], const int32_t stride[COLLX_GRID_NUM_DIMS],
                        int32_t rank, int32_t coords[COLLX_GRID_NUM_DIMS]) {
  for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) coords[d] = (rank / stride[d]) % dims[d];
}

std::string plan_expert_layout(collx_grid_s* g, const int perm[COLLX_GRID_NUM_DIMS]) {
  const int32_t ep = g->dims[COLLX_DIM_EP];
  const int64_t folded = static_cast<int64_t>(g->dims[COLLX_DIM_CP]) * g->dims[COLLX_DIM_DP];
  if (folded % ep != 0)
    return "ep = " + std::to_string(ep) + " does not divide cp*dp = " + std::to_string(folded) +
           " (expert parallelism is carved out of the data-parallel ranks: as in Megatron, world size " +
           std::to_string(g->world_size) + " must be a multiple of tp*ep*pp = " +
           std::to_string(static_cast<int64_t>(g->dims[COLLX_DIM_TP]) * ep * g->dims[COLLX_DIM_PP]) + ")";
  g->edims[COLLX_DIM_TP] = g->dims[COLLX_DIM_TP];
  g->edims[COLLX_DIM_CP] = 1;
  g->edims[COLLX_DIM_EP] = ep;
  g->edims[COLLX_DIM_DP] = static_cast<int32_t>(folded / ep);
  g->edims[COLLX_DIM_PP] = g->dims[COLLX_DIM_PP];
  for (int i = 0; i < COLLX_GRID_NUM_DIMS; ++i) {
    if (perm[i] == COLLX_DIM_EP) {
      g->ep_fast = true;
      break;
    }
    if (perm[i] == COLLX_DIM_DP) {
      g->ep_fast = false;
      break;
    }
  }
  return "";
}

void expert_coords(const collx_grid_s* g, int32_t rank, int32_t out[COLLX_GRID_NUM_DIMS]) {
  int32_t c[COLLX_GRID_NUM_DIMS];
  mixed_radix_coords(g->dims, g->stride, rank, c);
  const int32_t f = folded_index(g, c);
  const int32_t ep = g->edims[COLLX_DIM_EP], edp = g->edims[COLLX_DIM_DP];
  out[COLLX_DIM_TP] = c[COLLX_DIM_TP];
  out[COLLX_DIM_CP] = 0;
  out[COLLX_DIM_EP] = g->ep_fast ? f % ep : f / edp;
  out[COLLX_DIM_DP] = g->ep_fast ? f / ep : f % edp;
  out[COLLX_DIM_PP] = c[COLLX_DIM_PP];
}

int32_t expert_rank(const collx_grid_s* g, const int32_t ec[COLLX_GRID_NUM_DIMS]) {
  const int32_t ep = g->edims[COLLX_DIM_EP], edp = g->edims[COLLX_DIM_DP];
  const int32_t f = g->ep_fast ? ec[COLLX_DIM_EP] + ec[COLLX_DIM_DP] * ep : ec[COLLX_DIM_DP] + ec[COLLX_DIM_EP] * edp;
  int32_t c[COLLX_GRID_NUM_DIMS] = {ec[COLLX_DIM_TP], 0, 0, 0, ec[COLLX_DIM_PP]};
  unfold_index(g, f, c);
  return c[COLLX_DIM_TP] * g->stride[COLLX_DIM_TP] + c[COLLX_DIM_CP] * g->stride[COLLX_DIM_CP] +
         c[COLLX_DIM_DP] * g->stride[COLLX_DIM_DP] + c[COLLX_DIM_PP] * g->stride[COLLX_DIM_PP];
}

}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_grid_expert_dims(collx_grid_t grid, int32_t dims[COLLX_GRID_NUM_DIMS]) {
  if (!grid || !dims) {
    collx::parallel::thread_error() = "collx_grid_expert_dims: grid or dims is NULL";
    if (grid) grid->error.set(collx::parallel::thread_error());
    return COLLX_ERR_INVALID_ARG;
  }
  for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) dims[d] = grid->edims[d];
  return COLLX_OK;
}

COLLX_API collx_status_t collx_grid_expert_coords(collx_grid_t grid, int32_t rank,
                                                  int32_t coords[COLLX_GRID_NUM_DIMS]) {
  std::string why;
  if (!grid || !coords)
    why = "grid or coords is NULL";
  else if (rank < 0 || rank >= grid->world_size)
    why = "rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(grid->world_size) + ")";
  if (!why.empty()) {
    collx::parallel::thread_error() = "collx_grid_expert_coords: " + why;
    if (grid) grid->error.set(collx::parallel::thread_error());
    return COLLX_ERR_INVALID_ARG;
  }
  collx::parallel::expert_coords(grid, rank, coords);
  return COLLX_OK;
}

}  // extern "C"
