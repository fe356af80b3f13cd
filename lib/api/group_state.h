// The calling thread's group (collx_group_start / collx_group_end, docs/groups.md): while one
// is open, every collective and point-to-point call of this thread is checked and recorded
// here instead of run; the outermost collx_group_end hands the record to lib/core/comm_group.
#pragma once

#include "collx/collx.h"
#include "lib/common/status.h"
#include "lib/core/comm.h"

namespace collx {
namespace api {

// True while this thread is between collx_group_start and its matching collx_group_end.
bool group_open();

// Records `call` on `comm` in this thread's open group after checking its arguments (a bad
// one is returned here, and collx_group_end then fails naming it without running anything).
// `request` is non-null for a collx_i* call: it gets a request finished when the group ends.
Status group_record(collx_comm_t comm, const CollCall& call, collx_request_t* request);

// True when `request` belongs to a call recorded in this thread's open group: waiting on it
// before collx_group_end would wait forever.
bool group_holds(const RequestImpl* request);

}  // namespace api
}  // namespace collx
