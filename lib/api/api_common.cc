// Version, names, status strings, struct initializers and the last-error machinery.
#include <cstring>

#include "lib/api/handles.h"
#include "lib/common/thread_error.h"
#include "lib/core/launch_env.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace api {

void set_thread_error(const Status& status) {
  thread_error_message() =
      status.ok() ? std::string() : std::string(status_name(status.code())) + ": " + status.message();
}

const char* thread_error() { return thread_error_message().c_str(); }

// The rule of docs/api-conventions.md: the calling thread always gets the message, and the
// communicator too when the call had one.
collx_status_t report(collx_comm_t comm, const Status& status) {
  if (status.code() == COLLX_OK || status.code() == COLLX_IN_PROGRESS) return status.code();
  if (comm && comm->impl) comm->impl->set_last_error(status);
  set_thread_error(status);
  return status.code();
}

Status read_opts(const collx_opts_t* opts, CollCall* call) {
  if (!opts) return Status::Ok();
  if (opts->size < offsetof(collx_opts_t, algorithm) + sizeof(int32_t)) {
    return make_status(COLLX_ERR_INVALID_ARG, "opts->size is %zu; initialize options with "
                       "collx_opts_init(&opts, sizeof opts) before setting fields", opts->size);
  }
  // A caller compiled against this header (or a newer one) passes every field: read them in
  // place. An older, shorter struct gets the defaults for the fields it lacks.
  collx_opts_t full;
  const collx_opts_t* src = opts;
  if (opts->size < sizeof full) {
    opts_defaults(&full);
    std::memcpy(&full, opts, opts->size);
    src = &full;
  }
  call->algorithm = src->algorithm;
  call->mem_kind = src->mem_kind;
  call->timeout_ms = src->timeout_ms < 0 ? -1 : src->timeout_ms;
  call->premul_scalar = src->premul_scalar;
  call->stream = src->stream;
  return Status::Ok();
}

}  // namespace api
}  // namespace collx

using namespace collx;

extern "C" {

collx_status_t collx_get_version(int* major, int* minor, int* patch) {
  if (major) *major = COLLX_VERSION_MAJOR;
  if (minor) *minor = COLLX_VERSION_MINOR;
  if (patch) *patch = COLLX_VERSION_PATCH;
  return COLLX_OK;
}

const char* collx_get_version_string(void) { return COLLX_VERSION_STRING; }
const char* collx_status_name(collx_status_t status) { return status_name(status); }
const char* collx_status_string(collx_status_t status) { return status_string(status); }

const char* collx_last_error(collx_comm_t comm) {
  if (!comm || !comm->impl) return api::thread_error();
  return comm->impl->last_error();
}

const char* collx_datatype_name(collx_datatype_t datatype) { return datatype_name(datatype); }
const char* collx_op_name(collx_op_t op) { return op_name(op); }
const char* collx_coll_name(collx_coll_t coll) { return coll_name(coll); }
const char* collx_algorithm_name(collx_algorithm_t algorithm) { return algorithm_name(algorithm); }
size_t collx_datatype_size(collx_datatype_t datatype) { return datatype_size(datatype); }

collx_status_t collx_datatype_from_name(const char* name, collx_datatype_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!name || !out) return api::null_handle(!name ? "name" : "out");
    std::string n;
    for (const char* p = name; *p; ++p) n += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    static const struct { const char* alias; collx_datatype_t type; } kAliases[] = {
        {"half", COLLX_FLOAT16}, {"fp16", COLLX_FLOAT16}, {"bf16", COLLX_BFLOAT16},
        {"float", COLLX_FLOAT32}, {"fp32", COLLX_FLOAT32}, {"double", COLLX_FLOAT64},
        {"fp64", COLLX_FLOAT64}, {"int", COLLX_INT32}, {"char", COLLX_INT8}};
    for (const auto& a : kAliases) {
      if (n == a.alias) {
        *out = a.type;
        return Status::Ok();
      }
    }
    for (int t = 0; t < COLLX_NUM_DATATYPES; ++t) {
      if (n == datatype_name(t)) {
        *out = static_cast<collx_datatype_t>(t);
        return Status::Ok();
      }
    }
    return make_status(COLLX_ERR_INVALID_ARG, "unknown datatype '%s'", name);
  });
}

collx_status_t collx_op_from_name(const char* name, collx_op_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!name || !out) return api::null_handle(!name ? "name" : "out");
    std::string n;
    for (const char* p = name; *p; ++p) n += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    if (n == "premulsum" || n == "mulsum") n = "premul_sum";
    if (n == "product") n = "prod";
    for (int o = 0; o < COLLX_NUM_OPS; ++o) {
      if (n == op_name(o)) {
        *out = static_cast<collx_op_t>(o);
        return Status::Ok();
      }
    }
    return make_status(COLLX_ERR_INVALID_ARG, "unknown reduction op '%s'", name);
  });
}

collx_status_t collx_algorithm_from_name(const char* name, collx_algorithm_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!name || !out) return api::null_handle(!name ? "name" : "out");
    if (!algorithm_from_name(name, out)) {
      return make_status(COLLX_ERR_INVALID_ARG, "unknown algorithm '%s' (known: %s)", name, algorithm_names().c_str());
    }
    return Status::Ok();
  });
}

collx_status_t collx_config_init(collx_config_t* config, size_t size) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!config) return api::null_handle("config");
    if (size < offsetof(collx_config_t, rank)) {
      return make_status(COLLX_ERR_INVALID_ARG, "size %zu is too small for collx_config_t", size);
    }
    collx_config_t full;
    config_defaults(&full);
    size_t bytes = size < sizeof full ? size : sizeof full;
    std::memset(config, 0, size);
    std::memcpy(config, &full, bytes);
    config->size = size;
    return Status::Ok();
  });
}

collx_status_t collx_opts_init(collx_opts_t* opts, size_t size) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!opts) return api::null_handle("opts");
    if (size < offsetof(collx_opts_t, algorithm) + sizeof(int32_t)) {
      return make_status(COLLX_ERR_INVALID_ARG, "size %zu is too small for collx_opts_t", size);
    }
    collx_opts_t full;
    opts_defaults(&full);
    size_t bytes = size < sizeof full ? size : sizeof full;
    std::memset(opts, 0, size);
    std::memcpy(opts, &full, bytes);
    opts->size = size;
    return Status::Ok();
  });
}

}  // extern "C"
