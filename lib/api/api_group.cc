// collx_group_start / collx_group_end: the per-thread record of grouped calls.
#include <utility>
#include <vector>

#include "lib/api/group_state.h"
#include "lib/api/handles.h"
#include "lib/common/exception_status.h"
#include "lib/core/comm_group.h"
#include "lib/core/names.h"

namespace collx {
namespace api {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<GroupCall> calls;
  Status error;  // the first call refused while recording, named
  std::shared_ptr<Communicator> error_comm;
};

thread_local GroupState t_group;

// Ends every recorded request with `status` (the group will not run them).
void finish_requests(const std::vector<GroupCall>& calls, const Status& status) {
  for (const GroupCall& c : calls) {
    if (c.request) c.request->finish(status);
  }
}

}  // namespace

bool group_open() { return t_group.depth > 0; }

Status group_record(collx_comm_t comm, const CollCall& call, collx_request_t* request) {
  GroupState& g = t_group;
  const size_t index = g.calls.size() + 1;
  CollCall checked;
  Status st = comm->impl->check_recorded(call, &checked);
  if (!st.ok()) {
    st = st.with_context(string_printf("%s recorded as call %zu of a group: ", coll_name(call.coll), index));
    if (g.error.ok()) {
      g.error = Status(st.code(), "collx_group_end ran nothing: " + st.message());
      g.error_comm = comm->impl;
    }
    return st;
  }
  GroupCall recorded{comm->impl, std::move(checked), nullptr};
  if (request) recorded.request = std::make_shared<RequestImpl>(comm->impl, /*is_p2p=*/false);
  g.calls.push_back(recorded);
  if (request) *request = new collx_request_s{recorded.request};
  return Status::Ok();
}

bool group_holds(const RequestImpl* request) {
  for (const GroupCall& c : t_group.calls) {
    if (c.request.get() == request) return true;
  }
  return false;
}

}  // namespace api
}  // namespace collx

using namespace collx;

extern "C" {

collx_status_t collx_group_start(void) {
  ++api::t_group.depth;
  return COLLX_OK;
}

collx_status_t collx_group_end(void) {
  api::GroupState& g = api::t_group;
  if (g.depth == 0) {
    api::set_thread_error(Status(COLLX_ERR_INVALID_USAGE,
                                 "collx_group_end without a matching collx_group_start on this thread"));
    return COLLX_ERR_INVALID_USAGE;
  }
  if (--g.depth > 0) return COLLX_OK;
  // Closed before running, so a failure below still leaves this thread outside any group.
  std::vector<GroupCall> calls = std::move(g.calls);
  g.calls.clear();
  Status error = std::move(g.error);
  std::shared_ptr<Communicator> failed = std::move(g.error_comm);
  g.error = Status::Ok();
  g.error_comm.reset();
  if (error.ok()) {
    try {
      error = run_group(calls, &failed);
    } catch (...) {
      error = current_exception_status("collx_group_end");
      api::finish_requests(calls, error);
    }
  } else {
    api::finish_requests(calls, error);
  }
  if (error.ok()) return COLLX_OK;
  if (failed) failed->set_last_error(error);
  api::set_thread_error(error);
  return error.code();
}

}  // extern "C"
