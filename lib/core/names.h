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

// True when `algorithm` has a schedule for `coll` (AUTO implements everything).
bool algorithm_implements(collx_algorithm_t algorithm, collx_coll_t coll);

// "allreduce #12 (count 1000, float32, sum, ring)", "send (count 8, int32)", ...
std::string describe_op(const transport::OpDesc& desc);

}  // namespace collx
