// Grouped calls (collx_group_start / collx_group_end, docs/groups.md): the calls one thread
// recorded between them, issued as one batch per communicator when the outermost group ends.
//  - Point-to-point: every receive, then every send, is posted nonblocking before anything
//    waits, so no order of sends and receives inside a group can deadlock.
//  - Collectives run in the order recorded on each communicator, except that small all-reduces
//    with the same datatype, op, scalar and algorithm are packed into one message
//    (COLLX_GROUP_FUSE_BYTES), issued where the first of them was recorded. A fused message
//    carries a description of its member counts, so ranks that grouped differently fail with
//    COLLX_ERR_MISMATCH instead of exchanging wrongly cut data.
//  - Several communicators: the first one's collectives run on the calling thread, the others'
//    on their progress threads, concurrently, so ranks may name the communicators in any order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/common/status.h"
#include "lib/core/comm.h"

namespace collx {

// One call recorded inside a group.
struct GroupCall {
  std::shared_ptr<Communicator> comm;
  CollCall call;
  // A collx_i* call: the request handed to the caller, finished with this call's status when
  // the group has run (it may be tested meanwhile, never waited on inside the group).
  std::shared_ptr<RequestImpl> request;
};

// Runs a closed group and returns when every call completed or failed (each by its own
// deadline, counted from the start of this function). Returns OK, or the first failure with
// a message naming the call by its position in the group ("call 3 of 5: allreduce ...");
// *failed_comm is then that call's communicator. A call that cannot be planned (an argument
// that became invalid, a communicator that failed since it was recorded) fails the whole
// group before anything is issued on any communicator.
Status run_group(const std::vector<GroupCall>& calls, std::shared_ptr<Communicator>* failed_comm);

// COLLX_GROUP_FUSE_BYTES: the largest message of fused all-reduces (0 turns fusion off).
Status group_fuse_bytes(uint64_t* out);

}  // namespace collx
