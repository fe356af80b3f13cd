#include "bench/collx_bench/launch_env.h"

#include <cerrno>
#include <cstdlib>

namespace collx_bench {

namespace {

bool set(const EnvFn& env, const char* name) {
  const char* v = env(name);
  return v != nullptr && *v != '\0';
}

bool parse_nonneg(const char* text, int* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > (1 << 30)) return false;
  *out = static_cast<int>(v);
  return true;
}

// Rank and size variable pairs of the launchers that need mapping, in priority order.
struct RankVars {
  const char* rank;
  const char* size;
};
const RankVars kRankVars[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
};

}  // namespace

EnvFn process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::string detect_launcher(const EnvFn& env) {
  for (const char* name : {"COLLX_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (set(env, name)) return name;
  }
  int ntasks = 0;
  if (set(env, "SLURM_PROCID") && parse_nonneg(env("SLURM_NTASKS"), &ntasks) && ntasks > 1) {
    return "SLURM_PROCID";
  }
  return "";
}

bool launcher_rank(const EnvFn& env, int* rank, int* size, bool* found, std::string* error) {
  *found = false;
  const std::string launcher = detect_launcher(env);
  if (launcher.empty() || launcher == "COLLX_RANK" || launcher == "RANK") return false;
  for (const RankVars& v : kRankVars) {
    if (launcher != v.rank) continue;
    *found = true;
    if (!parse_nonneg(env(v.rank), rank) || !parse_nonneg(env(v.size), size) || *size < 1 ||
        *rank >= *size) {
      *error = std::string("cannot read the rank from ") + v.rank + "/" + v.size;
      return false;
    }
    if (!set(env, "COLLX_STORE_ADDR")) {
      *error = std::string("running under a launcher (") + v.rank +
               " is set) but COLLX_STORE_ADDR is not: give every rank the address rank 0 "
               "will host the store on, e.g. mpirun -x COLLX_STORE_ADDR=<host of rank 0>:29500";
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace collx_bench
