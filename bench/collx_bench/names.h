// Names printed and parsed by collx-bench: collectives, datatypes and ops.
//
// The datatype and op columns use nccl-tests' spellings ("float", "half", "mulsum") so the
// tables can be diffed against nccl-tests logs and fed to the same plotting scripts; the
// parser also takes collx's own names ("float32", "premulsum"). These tables are local
// (enum values come from the public header only) so the parser works, and is unit-tested,
// without linking libcollx.
#pragma once

#include <string>

#include "collx/collx.h"

namespace collx_bench {

// The collectives collx-bench measures. Sendrecv is a ring exchange built from
// collx_isend/collx_irecv (each rank sends to rank+1 and receives from rank-1).
enum class BenchColl {
  kAllreduce, kReduceScatter, kAllgather, kBroadcast, kReduce, kAlltoall, kGather, kScatter, kAllgatherv,
  kAlltoallv, kReduceScatterv, kGatherv, kScatterv, kSendrecv
};

// "allreduce", "reducescatter", ...: the name used on the command line and in the header.
const char* bench_coll_name(BenchColl coll);
// Accepts the canonical names plus nccl-tests' spellings: case-insensitive, '_' and '-'
// ignored, an optional "_perf" suffix ("all_reduce_perf"), "bcast".
bool bench_coll_from_name(const std::string& name, BenchColl* out);
// The collx_coll_t used to ask the library which algorithm it picks (send for sendrecv).
collx_coll_t bench_coll_kind(BenchColl coll);
bool bench_coll_reduces(BenchColl coll);      // takes an op
bool bench_coll_rooted(BenchColl coll);       // takes a root
bool bench_coll_has_in_place(BenchColl coll); // collx defines an in-place form

// nccl-tests spelling of a datatype ("float", "half", "bfloat16", "int8", ...).
const char* datatype_display_name(collx_datatype_t datatype);
// collx names, nccl-tests names and common aliases (fp16, bf16, fp32, fp64, char, int).
bool datatype_from_name(const std::string& name, collx_datatype_t* out);
size_t datatype_bytes(collx_datatype_t datatype);
bool datatype_is_signed(collx_datatype_t datatype);  // true for floating types too
bool datatype_is_float(collx_datatype_t datatype);

// nccl-tests spelling of an op ("sum", "prod", "min", "max", "avg", "mulsum").
const char* op_display_name(collx_op_t op);
// Also "premulsum", "premul_sum" and "mulsum".
bool op_from_name(const std::string& name, collx_op_t* out);

// Transport name -> COLLX_TRANSPORT_* bit; false for names collx does not define.
bool transport_from_name(const std::string& name, unsigned* mask);

// Lower-cases and drops '_' and '-', so "All_Reduce" == "allreduce".
std::string normalize_name(const std::string& name);

}  // namespace collx_bench
