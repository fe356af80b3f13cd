#include "bench/collx_bench/names.h"

#include <cctype>

namespace collx_bench {

namespace {

struct CollEntry {
  BenchColl coll;
  const char* name;
  collx_coll_t kind;
  bool reduces;
  bool rooted;
  bool in_place;
};

// In-place forms exist for the five collectives collx.h documents one for; alltoall is
// "not in place" by contract and a ring sendrecv on one buffer would race. Gather and
// scatter are in place on the root only, which one in-place column cannot show.
const CollEntry kColls[] = {
    {BenchColl::kAllreduce, "allreduce", COLLX_COLL_ALLREDUCE, true, false, true},
    {BenchColl::kReduceScatter, "reducescatter", COLLX_COLL_REDUCE_SCATTER, true, false, true},
    {BenchColl::kAllgather, "allgather", COLLX_COLL_ALLGATHER, false, false, true},
    {BenchColl::kBroadcast, "broadcast", COLLX_COLL_BROADCAST, false, true, true},
    {BenchColl::kReduce, "reduce", COLLX_COLL_REDUCE, true, true, true},
    {BenchColl::kAlltoall, "alltoall", COLLX_COLL_ALLTOALL, false, false, false},
    {BenchColl::kGather, "gather", COLLX_COLL_GATHER, false, true, false},
    {BenchColl::kScatter, "scatter", COLLX_COLL_SCATTER, false, true, false},
    {BenchColl::kAllgatherv, "allgatherv", COLLX_COLL_ALLGATHERV, false, false, false},
    {BenchColl::kAlltoallv, "alltoallv", COLLX_COLL_ALLTOALLV, false, false, false},
    {BenchColl::kReduceScatterv, "reducescatterv", COLLX_COLL_REDUCE_SCATTERV, true, false, true},
    {BenchColl::kGatherv, "gatherv", COLLX_COLL_GATHERV, false, true, false},
    {BenchColl::kScatterv, "scatterv", COLLX_COLL_SCATTERV, false, true, false},
    {BenchColl::kSendrecv, "sendrecv", COLLX_COLL_SEND, false, false, false},
};

const CollEntry& coll_entry(BenchColl coll) {
  for (const CollEntry& e : kColls) {
    if (e.coll == coll) return e;
  }
  return kColls[0];
}

struct TypeEntry {
  collx_datatype_t type;
  const char* display;  // nccl-tests name
  size_t bytes;
  bool is_signed;
  bool is_float;
};

const TypeEntry kTypes[] = {
    {COLLX_INT8, "int8", 1, true, false},       {COLLX_UINT8, "uint8", 1, false, false},
    {COLLX_INT32, "int32", 4, true, false},     {COLLX_UINT32, "uint32", 4, false, false},
    {COLLX_INT64, "int64", 8, true, false},     {COLLX_UINT64, "uint64", 8, false, false},
    {COLLX_FLOAT16, "half", 2, true, true},     {COLLX_BFLOAT16, "bfloat16", 2, true, true},
    {COLLX_FLOAT32, "float", 4, true, true},    {COLLX_FLOAT64, "double", 8, true, true},
};

struct Alias {
  const char* name;  // normalized
  collx_datatype_t type;
};

const Alias kTypeAliases[] = {
    {"float16", COLLX_FLOAT16}, {"fp16", COLLX_FLOAT16},  {"f16", COLLX_FLOAT16},
    {"bf16", COLLX_BFLOAT16},   {"float32", COLLX_FLOAT32}, {"fp32", COLLX_FLOAT32},
    {"f32", COLLX_FLOAT32},     {"float64", COLLX_FLOAT64}, {"fp64", COLLX_FLOAT64},
    {"f64", COLLX_FLOAT64},     {"char", COLLX_INT8},       {"int", COLLX_INT32},
};

const char* const kOpDisplay[COLLX_NUM_OPS] = {"sum", "prod", "min", "max", "avg", "mulsum"};

const TypeEntry* type_entry(collx_datatype_t type) {
  for (const TypeEntry& e : kTypes) {
    if (e.type == type) return &e;
  }
  return nullptr;
}

}  // namespace

std::string normalize_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '_' || c == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

const char* bench_coll_name(BenchColl coll) { return coll_entry(coll).name; }

bool bench_coll_from_name(const std::string& name, BenchColl* out) {
  std::string n = normalize_name(name);
  const std::string suffix = "perf";
  if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
    n.resize(n.size() - suffix.size());
  }
  if (n == "bcast") n = "broadcast";
  for (const CollEntry& e : kColls) {
    if (n == e.name) {
      *out = e.coll;
      return true;
    }
  }
  return false;
}

collx_coll_t bench_coll_kind(BenchColl coll) { return coll_entry(coll).kind; }
bool bench_coll_reduces(BenchColl coll) { return coll_entry(coll).reduces; }
bool bench_coll_rooted(BenchColl coll) { return coll_entry(coll).rooted; }
bool bench_coll_has_in_place(BenchColl coll) { return coll_entry(coll).in_place; }

const char* datatype_display_name(collx_datatype_t datatype) {
  const TypeEntry* e = type_entry(datatype);
  return e ? e->display : "unknown";
}

bool datatype_from_name(const std::string& name, collx_datatype_t* out) {
  const std::string n = normalize_name(name);
  for (const TypeEntry& e : kTypes) {
    if (n == e.display) {
      *out = e.type;
      return true;
    }
  }
  for (const Alias& a : kTypeAliases) {
    if (n == a.name) {
      *out = a.type;
      return true;
    }
  }
  return false;
}

size_t datatype_bytes(collx_datatype_t datatype) {
  const TypeEntry* e = type_entry(datatype);
  return e ? e->bytes : 0;
}

bool datatype_is_signed(collx_datatype_t datatype) {
  const TypeEntry* e = type_entry(datatype);
  return e && e->is_signed;
}

bool datatype_is_float(collx_datatype_t datatype) {
  const TypeEntry* e = type_entry(datatype);
  return e && e->is_float;
}

const char* op_display_name(collx_op_t op) {
  return op >= 0 && op < COLLX_NUM_OPS ? kOpDisplay[op] : "unknown";
}

bool op_from_name(const std::string& name, collx_op_t* out) {
  std::string n = normalize_name(name);
  if (n == "premulsum") n = "mulsum";
  for (int i = 0; i < COLLX_NUM_OPS; ++i) {
    if (n == kOpDisplay[i]) {
      *out = static_cast<collx_op_t>(i);
      return true;
    }
  }
  return false;
}

bool transport_from_name(const std::string& name, unsigned* mask) {
  const std::string n = normalize_name(name);
  if (n == "auto") *mask = 0;  // COLLX_TRANSPORTS, else the library's choice
  else if (n == "tcp") *mask = COLLX_TRANSPORT_TCP;
  else if (n == "shm") *mask = COLLX_TRANSPORT_SHM;
  else if (n == "ucx") *mask = COLLX_TRANSPORT_UCX;
  else if (n == "nccl") *mask = COLLX_TRANSPORT_NCCL;
  else return false;
  return true;
}

}  // namespace collx_bench
