// collx-run: starts the ranks of a collx job on this node (torchrun's job, without Python).
// It uses the library's TCP store internals (lib/store) for the agents' rendezvous, so it
// links collx_internal; the ranks it starts use whatever libcollx they were built against.
#include <cstdio>
#include <string>

#include "tools/collx_run/agent.h"
#include "tools/collx_run/job_token.h"
#include "tools/collx_run/run_options.h"

int main(int argc, char** argv) {
  collx_run::RunOptions options;
  std::string error;
  switch (collx_run::parse_run_options(argc, argv, &options, &error)) {
    case collx_run::ParseResult::kHelp:
      std::fputs(collx_run::run_usage_text(), stdout);
      return 0;
    case collx_run::ParseResult::kError:
      std::fprintf(stderr, "collx-run: %s\n%s", error.c_str(), collx_run::run_usage_text());
      return 2;
    case collx_run::ParseResult::kRun:
      break;
  }
  // Single-node jobs get a job token unless COLLX_JOB_TOKEN is set (job_token.h).
  if (!collx_run::ensure_job_token(options, &error)) {
    std::fprintf(stderr, "collx-run: %s\n", error.c_str());
    return 1;
  }
  return collx_run::run_agent(options);
}
