#include "lib/core/names.h"

#include <cctype>

#include "algorithms/registry.h"
#include "lib/common/status.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

const char* const kCollNames[COLLX_NUM_COLLS] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce",
    "alltoall",  "barrier",        "send",      "recv",   "gather", "scatter", "allgatherv",
    "alltoallv", "reduce_scatterv", "gatherv",   "scatterv"};

std::string normalize(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '-') c = '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

const char* coll_name(int coll) {
  return coll >= 0 && coll < COLLX_NUM_COLLS ? kCollNames[coll] : "unknown";
}

const char* algorithm_name(int algorithm) {
  const algo::AlgorithmInfo* info = algo::algorithm_info(algorithm);
  return info ? info->name : "unknown";
}

bool coll_from_name(const std::string& name, collx_coll_t* out) {
  std::string n = normalize(name);
  if (n == "reducescatter") n = "reduce_scatter";
  if (n == "reducescatterv") n = "reduce_scatterv";
  if (n == "bcast") n = "broadcast";
  for (int i = 0; i < COLLX_NUM_COLLS; ++i) {
    if (n == kCollNames[i]) {
      *out = static_cast<collx_coll_t>(i);
      return true;
    }
  }
  return false;
}

bool algorithm_from_name(const std::string& name, collx_algorithm_t* out) {
  std::string n = normalize(name);
  if (n == "rd") n = "recursive_doubling";
  if (n == "tree") n = "double_tree";
  if (n == "shm") n = "shared_memory";
  for (int i = 0; i < COLLX_NUM_ALGORITHMS; ++i) {
    if (n == algo::algorithms()[i].name) {
      *out = static_cast<collx_algorithm_t>(i);
      return true;
    }
  }
  return false;
}

bool coll_has_root(int coll) {
  return coll == COLLX_COLL_BROADCAST || coll == COLLX_COLL_REDUCE || coll == COLLX_COLL_GATHER ||
         coll == COLLX_COLL_SCATTER || coll == COLLX_COLL_GATHERV || coll == COLLX_COLL_SCATTERV;
}

bool coll_reduces(int coll) {
  return coll == COLLX_COLL_ALLREDUCE || coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_REDUCE ||
         coll == COLLX_COLL_REDUCE_SCATTERV;
}

bool coll_is_v(int coll) {
  return coll == COLLX_COLL_ALLGATHERV || coll == COLLX_COLL_ALLTOALLV || coll == COLLX_COLL_REDUCE_SCATTERV ||
         coll == COLLX_COLL_GATHERV || coll == COLLX_COLL_SCATTERV;
}

bool coll_counts_hashed(int coll) { return coll == COLLX_COLL_ALLGATHERV || coll == COLLX_COLL_REDUCE_SCATTERV; }

bool algorithm_implements(collx_algorithm_t algorithm, collx_coll_t coll) {
  return algorithm == COLLX_ALGO_AUTO || algo::find_implementation(algorithm, coll) != nullptr;
}

std::string colls_of(int algorithm) {
  std::string out;
  size_t count = 0;
  const algo::Implementation* table = algo::implementations(&count);
  for (size_t i = 0; i < count; ++i) {
    if (table[i].algorithm == algorithm) out += std::string(out.empty() ? "" : ", ") + coll_name(table[i].coll);
  }
  return out;
}

std::string not_implemented(int algorithm, int coll) {
  if (algorithm < 0 || algorithm >= COLLX_NUM_ALGORITHMS) {
    return string_printf("unknown algorithm %d (valid: 0..%d, see collx_algorithm_t)", algorithm,
                         COLLX_NUM_ALGORITHMS - 1);
  }
  return string_printf("algorithm '%s' does not implement %s (it implements %s)", algorithm_name(algorithm),
                       coll_name(coll), colls_of(algorithm).c_str());
}

std::string algorithm_names() {
  std::string out;
  for (int i = 1; i < COLLX_NUM_ALGORITHMS; ++i) out += std::string(algo::algorithms()[i].name) + ", ";
  return out + algo::algorithms()[COLLX_ALGO_AUTO].name;
}

std::string coll_names() {
  std::string out;
  for (int i = 0; i < COLLX_NUM_COLLS; ++i) out += std::string(i ? ", " : "") + kCollNames[i];
  return out;
}

std::string describe_op(const transport::OpDesc& d) {
  const bool reduces = coll_reduces(d.kind);
  const bool rooted = coll_has_root(d.kind);
  const bool p2p = d.kind == COLLX_COLL_SEND || d.kind == COLLX_COLL_RECV;
  std::string out = p2p ? "send/recv" : coll_name(d.kind);
  if (!p2p) out += string_printf(" #%llu", static_cast<unsigned long long>(d.seq));
  // A v-collective's count field is a hash of its counts array (what ranks must agree on).
  const size_t fused = d.kind == COLLX_COLL_ALLREDUCE ? fused_members(d.root) : 0;
  if (fused > 0) {
    out += string_printf(" (%zu calls fused by a group, counts hash %016llx, %s", fused,
                         static_cast<unsigned long long>(d.count), datatype_name(d.datatype));
  } else if (coll_is_v(d.kind) && !coll_counts_hashed(d.kind)) {
    // The other v-collectives' sizes are checked message by message (coll_counts_hashed).
    out += string_printf(" (counts per message, %s", datatype_name(d.datatype));
  } else {
    out += string_printf(coll_counts_hashed(d.kind) ? " (counts hash %016llx, %s" : " (count %llu, %s",
                         static_cast<unsigned long long>(d.count), datatype_name(d.datatype));
  }
  if (reduces) out += string_printf(", %s", op_name(d.op));
  if (rooted) out += string_printf(", root %d", static_cast<int>(d.root));
  if (!p2p) out += string_printf(", %s", algorithm_name(d.algorithm));
  out += ")";
  return out;
}

}  // namespace collx
