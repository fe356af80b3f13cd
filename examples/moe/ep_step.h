// One training step of the MoE model with expert parallelism: every rank holds the dense
// layer, the router and E/ep experts; token copies travel with collx_moe_dispatch /
// collx_moe_combine over the EP communicator; dense gradients are summed over DP, expert
// gradients over the expert-data-parallel group.
#pragma once

#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "examples/moe/moe_model.h"

namespace moe {

struct Failure {
  std::string message;
};

struct EpRank {
  collx_comm_t world = nullptr, dp = nullptr, ep = nullptr, edp = nullptr;
  int32_t world_rank = 0, world_size = 1, ep_rank = 0, ep_size = 1;
  int32_t first_expert = 0, local_experts = 0;  // this rank's experts [first, first + local)
};

// The communicators and coordinates of this rank from a grid with ep = `ep`.
EpRank locate(collx_grid_t grid, collx_comm_t world);

// Forward, backward, gradient reduction and SGD on this rank's N tokens (global tokens
// [world_rank*N, (world_rank+1)*N)); experts not held here are left untouched in *w.
// Returns the global loss; *rows (when not NULL) gets the rows each local expert received.
// Throws Failure naming the collx call that failed.
double ep_step(const EpRank& r, Params* w, int step, std::vector<size_t>* rows = nullptr);

}  // namespace moe
