// Names of collectives and algorithms, which algorithm implements which collective, and the
// rendering of an operation for error messages.
#pragma once

#include <string>

#include "collx/collx.h"
#include "transports/transport.h"

namespace collx {

const char* coll_name(int coll);            // "allreduce"; "unknown" when out of range
const char* algorithm_name(int algorithm);  // "ring"; "unknown" when out of range
// Case-insensitive; accepts "-" for "_". False for unknown names.
bool coll_from_name(const std::string& name, collx_coll_t* out);
bool algorithm_from_name(const std::string& name, collx_algorithm_t* out);

// True for the collectives with a root argument (broadcast, reduce, gather, scatter,
// gatherv, scatterv).
bool coll_has_root(int coll);
// True for the collectives that reduce (all-reduce, reduce-scatter(v), reduce).
bool coll_reduces(int coll);
// True for the v-collectives, whose layout is an array of counts per rank (CollCall::counts).
bool coll_is_v(int coll);
// True for the v-collectives whose counts every rank passes alike (all-gatherv,
// reduce-scatterv): their OpDesc carries a hash of the counts. The others (all-to-allv,
// gatherv, scatterv) are checked message by message: each pair exchanges exactly one
// message per block, whose size the receiver compares with the count it passed.
bool coll_counts_hashed(int coll);

// True when `algorithm` has a schedule for `coll` in the registry (algorithms/registry.h);
// AUTO implements everything.
bool algorithm_implements(collx_algorithm_t algorithm, collx_coll_t coll);
// The collectives `algorithm` implements, in registry order: "allreduce, reduce_scatter".
std::string colls_of(int algorithm);
// Why (algorithm, coll) is refused, for every refusal of an unimplemented pair (validation,
// collx_select_algorithm, COLLX_ALGO): "algorithm 'pairwise' does not implement allreduce
// (it implements alltoall, ...)", or "unknown algorithm 12 (...)" out of range.
std::string not_implemented(int algorithm, int coll);
// Every algorithm name ("ring, ..., auto") and every collective name, for "known:" lists.
std::string algorithm_names();
std::string coll_names();

// "allreduce #12 (count 1000, float32, sum, ring)", "send (count 8, int32)", ...
std::string describe_op(const transport::OpDesc& desc);

// All-reduces fused into one message by a group (comm_group.cc) mark their OpDesc with a
// root of -2 - members (no collective has such a root) and carry a hash of the member
// counts as count, so describe_op can say what the message was.
inline int32_t fused_root(size_t members) {
  return members > 0x3fffffff ? -0x40000001 : -2 - static_cast<int32_t>(members);
}
inline size_t fused_members(int32_t root) { return root <= -2 ? static_cast<size_t>(-2 - static_cast<int64_t>(root)) : 0; }

}  // namespace collx
