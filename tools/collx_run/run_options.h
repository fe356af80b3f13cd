// collx-run's command line: what to launch, on how many nodes, and how to find the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace collx_run {

struct RunOptions {
  int nproc_per_node = 1;
  int min_nodes = 1;  // --nnodes N gives min = max = N; --nnodes MIN:MAX an elastic range
  int max_nodes = 1;
  int node_rank = -1;  // -1: assigned at rendezvous (the agent hosting the store gets 0)
  std::string endpoint;  // "host:port" of the rendezvous store; empty with --standalone
  std::string run_id = "none";
  int max_restarts = 0;
  bool standalone = false;
  int64_t rdzv_timeout_ms = 300000;      // every rendezvous wait ends by then
  int64_t heartbeat_timeout_ms = 30000;  // a peer agent silent this long is lost
  int64_t last_call_ms = 2000;           // elastic: wait this long for more than MIN nodes
  int64_t stop_grace_ms = 5000;          // SIGTERM, then SIGKILL after this long
  std::vector<std::string> program;      // PROGRAM ARGS...
};

enum class ParseResult { kRun, kHelp, kError };

// Accepts "--flag value", "--flag=value" and torchrun's underscore spellings (--nproc_per_node).
ParseResult parse_run_options(int argc, char** argv, RunOptions* out, std::string* error);

const char* run_usage_text();

}  // namespace collx_run
