// Which launcher, if any, started this process, and this rank's place in the job.
// Environment lookups go through an EnvFn so tests can supply a fake environment.
#pragma once

#include <functional>
#include <string>

namespace collx_bench {

using EnvFn = std::function<const char*(const char*)>;

// The process environment (std::getenv).
EnvFn process_env();

// The variable that marks a launcher ("COLLX_RANK", "RANK", "OMPI_COMM_WORLD_RANK",
// "PMI_RANK", "SLURM_PROCID" when SLURM_NTASKS > 1), or "" when collx-bench must start its
// own ranks. A lone srun task (SLURM_NTASKS = 1) counts as no launcher, so `srun -n1
// collx-bench` still spawns --np local ranks.
std::string detect_launcher(const EnvFn& env);

// Rank and world size for launchers that collx_comm_create_from_env does not read itself
// (Open MPI, PMI, Slurm). Returns false with *found = false for COLLX_* and torchrun
// variables (the library reads those) and false with *error set when a variable is
// malformed or COLLX_STORE_ADDR is missing.
bool launcher_rank(const EnvFn& env, int* rank, int* size, bool* found, std::string* error);

}  // namespace collx_bench
