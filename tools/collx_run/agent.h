// One collx-run agent: rendezvous, start this node's ranks, watch them and the other nodes,
// stop everything on the first failure and restart up to --max-restarts times.
#pragma once

#include "tools/collx_run/run_options.h"

namespace collx_run {

// Returns the process exit status: 0, the failing rank's status (128 + signal for a signal),
// 128 + signal when the agent itself was signalled, or 1 for an agent-level error.
int run_agent(const RunOptions& options);

}  // namespace collx_run
