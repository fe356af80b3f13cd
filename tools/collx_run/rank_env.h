// The environment each rank starts with: collx's own variables and torchrun's names for the
// same facts, so programs written for either launcher run unchanged.
#pragma once

#include <vector>

#include "tools/collx_run/rank_group.h"
#include "tools/collx_run/rendezvous.h"
#include "tools/collx_run/run_options.h"

namespace collx_run {

std::vector<RankSpec> rank_specs(const AttemptPlan& plan, const RunOptions& options);

}  // namespace collx_run
