#include "lib/core/launch_env.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lib/common/settings.h"
#include "lib/common/strings.h"

namespace collx {

namespace {

// Reads an integer environment variable; false when unset. A malformed value is an error.
Status env_int(const char* name, int* out, bool* found) {
  const char* value = std::getenv(name);
  *found = false;
  if (!value || !*value) return Status::Ok();
  errno = 0;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || parsed < INT32_MIN || parsed > INT32_MAX) {
    return make_status(COLLX_ERR_INVALID_ARG, "environment variable %s='%s' is not an integer", name, value);
  }
  *out = static_cast<int>(parsed);
  *found = true;
  return Status::Ok();
}

std::string env_str(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

// One launcher's names for rank, size, local rank and local size.
struct LauncherVars {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

const LauncherVars kLaunchers[] = {
    {"COLLX_*", "COLLX_RANK", "COLLX_WORLD_SIZE", "COLLX_LOCAL_RANK", "COLLX_LOCAL_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

}  // namespace

void config_defaults(collx_config_t* config) {
  std::memset(config, 0, sizeof *config);
  config->size = sizeof *config;
  config->version = COLLX_VERSION_CODE;
  config->rank = -1;
  config->world_size = -1;
  config->store_addr = nullptr;
  config->store = nullptr;
  config->timeout_ms = -1;
  config->transports = 0;
  config->device = -1;
  config->name = nullptr;
}

void opts_defaults(collx_opts_t* opts) {
  std::memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  opts->algorithm = COLLX_ALGO_AUTO;
  opts->mem_kind = COLLX_MEM_AUTO;
  opts->timeout_ms = -1;
  opts->premul_scalar = 1.0;
  opts->stream = nullptr;
}

Status read_user_config(const collx_config_t* user, collx_config_t* out) {
  config_defaults(out);
  if (!user) return Status::Ok();
  if (user->size < offsetof(collx_config_t, rank) || user->size > sizeof(collx_config_t)) {
    // A larger struct comes from a newer header: accept it only if we know every field.
    if (user->size > sizeof(collx_config_t)) {
      const auto* extra = reinterpret_cast<const unsigned char*>(user) + sizeof(collx_config_t);
      for (size_t i = 0; i < user->size - sizeof(collx_config_t); ++i) {
        if (extra[i] != 0) {
          return make_status(COLLX_ERR_INVALID_ARG,
                             "config->size is %zu but this library (%s) knows %zu bytes and the "
                             "extra fields are set; upgrade libcollx",
                             user->size, COLLX_VERSION_STRING, sizeof(collx_config_t));
        }
      }
    } else {
      return make_status(COLLX_ERR_INVALID_ARG,
                         "config->size is %zu; initialize the config with collx_config_init(&cfg, "
                         "sizeof cfg) before setting fields",
                         user->size);
    }
  }
  size_t bytes = user->size < sizeof(collx_config_t) ? user->size : sizeof(collx_config_t);
  std::memcpy(out, user, bytes);
  out->size = sizeof(collx_config_t);
  return Status::Ok();
}

Status parse_transport_list(const std::string& list, uint32_t* mask) {
  uint32_t result = 0;
  for (const std::string& name : split_trimmed(list, ',')) {
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "tcp") result |= COLLX_TRANSPORT_TCP;
    else if (lower == "shm") result |= COLLX_TRANSPORT_SHM;
    else if (lower == "ucx") result |= COLLX_TRANSPORT_UCX;
    else if (lower == "nccl") result |= COLLX_TRANSPORT_NCCL;
    else if (!lower.empty()) {
      return make_status(COLLX_ERR_INVALID_ARG, "unknown transport '%s' (known: tcp, shm, ucx, nccl)", name.c_str());
    }
  }
  *mask = result;
  return Status::Ok();
}

Status resolve_job_config(const collx_config_t& config, bool from_env, JobConfig* out) {
  JobConfig job;
  job.rank = config.rank;
  job.world_size = config.world_size;
  job.source = "config";
  if (config.store_addr) job.store_addr = config.store_addr;
  if (config.name) job.name = config.name;
  job.device = config.device;

  if (from_env && (job.rank < 0 || job.world_size < 0)) {
    for (const LauncherVars& launcher : kLaunchers) {
      int rank = -1, size = -1;
      bool has_rank = false, has_size = false;
      COLLX_RETURN_IF_ERROR(env_int(launcher.rank, &rank, &has_rank));
      COLLX_RETURN_IF_ERROR(env_int(launcher.size, &size, &has_size));
      if (!has_rank || !has_size) continue;
      if (job.rank < 0) job.rank = rank;
      if (job.world_size < 0) job.world_size = size;
      bool found = false;
      int value = -1;
      if (launcher.local_rank) {
        COLLX_RETURN_IF_ERROR(env_int(launcher.local_rank, &value, &found));
        if (found) job.local_rank = value;
      }
      if (launcher.local_size) {
        COLLX_RETURN_IF_ERROR(env_int(launcher.local_size, &value, &found));
        if (found) job.local_size = value;
      }
      job.source = launcher.source;
      break;
    }
  }

  if (!config.store && job.store_addr.empty() && from_env) {
    job.store_addr = setting_raw(SettingId::STORE_ADDR);
    if (job.store_addr.empty()) {
      std::string master_addr = env_str("MASTER_ADDR");
      int master_port = -1;
      bool has_port = false;
      COLLX_RETURN_IF_ERROR(env_int("MASTER_PORT", &master_port, &has_port));
      if (!master_addr.empty() && has_port) {
        // torchrun's own TCPStore holds MASTER_PORT; collx's store takes the next port.
        if (master_port <= 0 || master_port >= 65535) {
          return make_status(COLLX_ERR_INVALID_ARG, "MASTER_PORT=%d is not a usable port", master_port);
        }
        bool v6 = master_addr.find(':') != std::string::npos && master_addr.front() != '[';
        job.store_addr = (v6 ? "[" + master_addr + "]" : master_addr) + ":" + std::to_string(master_port + 1);
      }
    }
  }

  if (job.world_size <= 0) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       from_env ? "world size unknown: set COLLX_WORLD_SIZE (or WORLD_SIZE, "
                                  "SLURM_NTASKS, OMPI_COMM_WORLD_SIZE), or config->world_size"
                                : "config->world_size must be > 0 (got %d)",
                       job.world_size);
  }
  if (job.device < -1) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       "config->device is %d: give a CUDA device number (>= 0) or -1 (the device that "
                       "owns each call's buffers)",
                       job.device);
  }
  if (job.rank < 0 || job.rank >= job.world_size) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       "rank %d is out of range for world size %d (set config->rank or COLLX_RANK)",
                       job.rank, job.world_size);
  }
  if (!config.store && job.store_addr.empty() && job.world_size > 1) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       from_env ? "no store address: set COLLX_STORE_ADDR=host:port (or MASTER_ADDR "
                                  "and MASTER_PORT), or pass config->store"
                                : "config->store_addr or config->store is required when world_size > 1");
  }
  if ((job.local_rank >= 0) != (job.local_size > 0) ||
      (job.local_rank >= 0 && job.local_rank >= job.local_size)) {
    job.local_rank = job.local_size = -1;  // inconsistent launcher hints: derive instead
  }

  // Settings the config leaves unset.
  job.timeout_ms = config.timeout_ms;
  if (job.timeout_ms < 0) {
    int64_t timeout = -1;
    COLLX_RETURN_IF_ERROR(setting_int(SettingId::TIMEOUT_MS, &timeout));
    job.timeout_ms = timeout < 0 ? -1 : timeout;
  }
  job.transports = config.transports;
  if (job.transports == 0) {
    COLLX_RETURN_IF_ERROR(parse_transport_list(setting_raw(SettingId::TRANSPORTS), &job.transports));
    if (job.transports == 0) job.transports = COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_SHM | COLLX_TRANSPORT_UCX | COLLX_TRANSPORT_NCCL;
  }
  *out = std::move(job);
  return Status::Ok();
}

}  // namespace collx
