// Resolving how this process joins a job: rank, world size and store address from the
// caller's config, then the COLLX_* environment, then the variables that torchrun, Slurm and
// Open MPI's mpirun set, so jobs started by any of them work unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "collx/collx.h"
#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {

struct JobConfig {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;  // from the launcher when it says; else derived from host identities
  int local_size = -1;
  std::string store_addr;               // "host:port" of the TCP store (empty with `store`)
  std::shared_ptr<Store> store;         // an existing store, when the caller gave one
  int64_t timeout_ms = -1;              // resolved: >= 0, or -1 for none
  uint32_t transports = 0;              // COLLX_TRANSPORT_* mask
  int device = -1;
  std::string name = "world";
  std::string source;                   // "config", "COLLX_*", "torchrun", "slurm", "openmpi"
};

// The "unset" values of every field (what collx_config_init / collx_opts_init give).
void config_defaults(collx_config_t* config);
void opts_defaults(collx_opts_t* opts);

// Copy a caller's config of any known size into a full, initialized struct.
Status read_user_config(const collx_config_t* user, collx_config_t* out);

// `from_env`: fill what the config leaves unset from the environment (collx_comm_create_from_env);
// otherwise rank, world size and store must be in the config (collx_comm_create).
Status resolve_job_config(const collx_config_t& config, bool from_env, JobConfig* out);

// Parses "tcp,shm" into a mask; unknown names are COLLX_ERR_INVALID_ARG.
Status parse_transport_list(const std::string& list, uint32_t* mask);

}  // namespace collx
