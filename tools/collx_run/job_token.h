// The job token of a single-node job: when COLLX_JOB_TOKEN is unset, collx-run makes one up
// (16 random bytes from OpenSSL, hex) and puts it in its own environment, so its store, its
// agent and every rank it starts (they inherit the environment) authenticate each other, and
// a process outside the job cannot join. A multi-node job cannot do this: other nodes have no
// way to learn a token made here, so there COLLX_JOB_TOKEN must be set in every node's
// environment (docs/security.md).
#pragma once

#include <string>

#include "tools/collx_run/run_options.h"

namespace collx_run {

// Sets COLLX_JOB_TOKEN for a single-node job (--standalone or --nnodes 1) when it is unset
// and this build has OpenSSL; a set value, even empty (authentication off), is kept. False
// with *error when the random bytes cannot be had.
bool ensure_job_token(const RunOptions& options, std::string* error);

}  // namespace collx_run
