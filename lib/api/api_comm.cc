// Communicator entry points.
#include <cstring>

#include "lib/api/handles.h"
#include "lib/common/log.h"
#include "lib/core/launch_env.h"

using namespace collx;

namespace {

collx_status_t create_comm(const collx_config_t* config, bool from_env, collx_comm_t* out) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!out) return api::null_handle("comm (output)");
    *out = nullptr;
    if (!from_env && !config) return api::null_handle("config");
    collx_config_t full;
    COLLX_RETURN_IF_ERROR(read_user_config(config, &full));
    JobConfig job;
    COLLX_RETURN_IF_ERROR(resolve_job_config(full, from_env, &job));
    if (full.store) {
      if (!full.store->impl) return api::null_handle("config->store (destroyed?)");
      job.store = full.store->impl;
    }
    std::shared_ptr<Communicator> comm;
    Status st = Communicator::create(job, &comm);
    if (!st.ok()) return st;
    *out = new collx_comm_s{std::move(comm)};
    return Status::Ok();
  });
}

}  // namespace

extern "C" {

collx_status_t collx_comm_create(const collx_config_t* config, collx_comm_t* comm) {
  return create_comm(config, /*from_env=*/false, comm);
}

collx_status_t collx_comm_create_from_env(const collx_config_t* config, collx_comm_t* comm) {
  return create_comm(config, /*from_env=*/true, comm);
}

collx_status_t collx_comm_split(collx_comm_t comm, int32_t color, int32_t key, collx_comm_t* newcomm) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!newcomm) return api::null_handle("newcomm");
    *newcomm = nullptr;
    std::shared_ptr<Communicator> child;
    COLLX_RETURN_IF_ERROR(comm->impl->split(color, key, &child));
    if (child) *newcomm = new collx_comm_s{std::move(child)};
    return Status::Ok();
  });
}

collx_status_t collx_comm_dup(collx_comm_t comm, collx_comm_t* newcomm) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!newcomm) return api::null_handle("newcomm");
    *newcomm = nullptr;
    std::shared_ptr<Communicator> child;
    COLLX_RETURN_IF_ERROR(comm->impl->dup(&child));
    *newcomm = new collx_comm_s{std::move(child)};
    return Status::Ok();
  });
}

collx_status_t collx_comm_shrink(collx_comm_t comm, int64_t timeout_ms, collx_comm_t* newcomm) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!newcomm) return api::null_handle("newcomm");
    *newcomm = nullptr;
    std::shared_ptr<Communicator> child;
    COLLX_RETURN_IF_ERROR(comm->impl->shrink(timeout_ms, &child));
    *newcomm = new collx_comm_s{std::move(child)};
    return Status::Ok();
  });
}

collx_status_t collx_comm_destroy(collx_comm_t comm) {
  if (!comm) return COLLX_OK;
  collx_status_t rc = api::guarded(nullptr, [&]() -> Status {
    if (comm->impl) comm->impl->destroy();
    return Status::Ok();
  });
  delete comm;
  return rc;
}

collx_status_t collx_comm_abort(collx_comm_t comm) {
  if (!comm || !comm->impl) return api::report(nullptr, api::null_handle("comm"));
  comm->impl->abort();
  return COLLX_OK;
}

#define COLLX_COMM_QUERY_(fn, what, expr)                                   \
  collx_status_t fn(collx_comm_t comm, int32_t* out) {                      \
    return api::guarded(comm, [&]() -> Status {                             \
      if (!comm || !comm->impl) return api::null_handle("comm");            \
      if (!out) return api::null_handle(what);                              \
      *out = comm->impl->expr();                                            \
      return Status::Ok();                                                  \
    });                                                                     \
  }
COLLX_COMM_QUERY_(collx_comm_rank, "rank", rank)
COLLX_COMM_QUERY_(collx_comm_size, "size", size)
COLLX_COMM_QUERY_(collx_comm_local_rank, "local_rank", local_rank)
COLLX_COMM_QUERY_(collx_comm_local_size, "local_size", local_size)
#undef COLLX_COMM_QUERY_

collx_status_t collx_comm_transport(collx_comm_t comm, const char** name) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!name) return api::null_handle("name");
    *name = comm->impl->transport_name();
    return Status::Ok();
  });
}

collx_status_t collx_explain(collx_comm_t comm, collx_coll_t coll, size_t count, collx_datatype_t datatype,
                             char* buf, size_t* len) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!len) return api::null_handle("len");
    std::string text;
    COLLX_RETURN_IF_ERROR(comm->impl->check_choice("collx_explain", coll, static_cast<int32_t>(datatype),
                                                   COLLX_ALGO_AUTO));
    COLLX_RETURN_IF_ERROR(comm->impl->explain(coll, count, datatype, &text));
    const size_t needed = text.size() + 1;
    const size_t capacity = *len;
    *len = needed;
    if (buf == nullptr || capacity < needed) {
      return make_status(COLLX_ERR_INVALID_ARG, "collx_explain: the text needs %zu bytes, the buffer has %zu%s",
                         needed, buf ? capacity : size_t{0}, buf ? "" : " (buf is NULL)");
    }
    std::memcpy(buf, text.c_str(), needed);
    return Status::Ok();
  });
}

collx_status_t collx_comm_get_async_error(collx_comm_t comm, collx_status_t* error) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!error) return api::null_handle("error");
    *error = comm->impl->health().code();
    return Status::Ok();
  });
}

collx_status_t collx_comm_dump_flight_record(collx_comm_t comm, const char* dir) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    return comm->impl->dump_flight_record(dir ? dir : "");
  });
}

collx_status_t collx_select_algorithm(collx_comm_t comm, collx_coll_t coll, size_t count,
                                      collx_datatype_t datatype, const collx_opts_t* opts,
                                      collx_algorithm_t* algorithm) {
  return api::guarded(comm, [&]() -> Status {
    if (!comm || !comm->impl) return api::null_handle("comm");
    if (!algorithm) return api::null_handle("algorithm");
    CollCall call;
    COLLX_RETURN_IF_ERROR(api::read_opts(opts, &call));
    COLLX_RETURN_IF_ERROR(comm->impl->check_choice("select_algorithm", coll, static_cast<int32_t>(datatype),
                                                   call.algorithm));
    *algorithm = comm->impl->choose_algorithm(coll, count, static_cast<int32_t>(datatype), call.algorithm);
    return Status::Ok();
  });
}

}  // extern "C"
