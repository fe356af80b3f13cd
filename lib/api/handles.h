// What the opaque C handles point to, and the guard every C entry point runs in: it catches
// every exception (none may cross the C boundary), records the error message where
// collx_last_error finds it, and prefixes log lines with the communicator's rank.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "collx/collx.h"
#include "lib/common/status.h"
#include "lib/core/comm.h"
#include "lib/store/store.h"

struct collx_comm_s {
  std::shared_ptr<collx::Communicator> impl;
};

struct collx_request_s {
  std::shared_ptr<collx::RequestImpl> impl;
};

struct collx_store_s {
  // Communicators made from the store share it. When this handle hosted a TCP server, the
  // server belongs to `impl` (api_store.cc), so it runs until the last sharer is gone.
  std::shared_ptr<collx::Store> impl;
};

namespace collx {
namespace api {

// The calling thread's message (collx_last_error(NULL)): every failed call records it.
void set_thread_error(const Status& status);
const char* thread_error();

// Records `status` as the calling thread's last error (and `comm`'s when given); returns its code.
collx_status_t report(collx_comm_t comm, const Status& status);

// Runs `body` (returning Status), converting exceptions into statuses.
template <typename Body>
collx_status_t guarded(collx_comm_t comm, Body&& body) {
  try {
    return report(comm, body());
  } catch (const std::bad_alloc&) {
    return report(comm, Status(COLLX_ERR_NO_MEMORY, "out of memory"));
  } catch (const std::exception& e) {
    return report(comm, Status(COLLX_ERR_INTERNAL, std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(comm, Status(COLLX_ERR_INTERNAL, "unexpected exception"));
  }
}

inline Status null_handle(const char* what) {
  return make_status(COLLX_ERR_INVALID_ARG, "%s is NULL", what);
}

// Reads optional per-call options into a CollCall (NULL = defaults).
Status read_opts(const collx_opts_t* opts, CollCall* call);

}  // namespace api
}  // namespace collx
