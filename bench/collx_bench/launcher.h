// Starting local ranks when collx-bench runs without a launcher: fork + exec of
// /proc/self/exe with the same arguments and COLLX_RANK, COLLX_WORLD_SIZE,
// COLLX_LOCAL_RANK, COLLX_LOCAL_WORLD_SIZE and COLLX_STORE_ADDR=127.0.0.1:<free port>.
#pragma once

#include <string>

namespace collx_bench {

// Exit statuses of collx-bench (and of each rank).
constexpr int kExitOk = 0;
constexpr int kExitWrongResults = 1;  // the run completed, some results were wrong
constexpr int kExitUsage = 2;         // bad command line
constexpr int kExitFailure = 3;       // a collx call (or the launcher) failed

// A TCP port that was free on 127.0.0.1 a moment ago (bind port 0, read it, close), or -1
// with *error set. Rank 0's store binds it right after; the small race is accepted.
int pick_free_port(std::string* error);

// Starts `np` ranks running argv, waits for them and returns the exit status for main:
// 0 when every rank succeeded, else the failing rank's exit code (128 + signal when it was
// killed by a signal). When a rank fails (any status but 0, 1 and 2, which every rank
// reaches together) the others are sent SIGTERM, then SIGKILL after a grace period.
// SIGINT and SIGTERM received by this process are forwarded to the ranks.
int spawn_local_ranks(int np, char** argv);

}  // namespace collx_bench
