// The example's training loop over a DP x TP x PP grid: builds the layout of this rank's
// tensors, checks it across DP ranks, runs forward/backward (tensor-, sequence- or
// pipeline-parallel), reduces, steps, and writes per-step loss, norm and full parameters.
#pragma once

#include "collx/collx.h"
#include "examples/mlp/param_store.h"

namespace mlp {

// Trains opt.steps steps on `world`; world rank 0 writes opt.out. Throws Failure.
void train(const Options& opt, collx_comm_t world);

}  // namespace mlp
