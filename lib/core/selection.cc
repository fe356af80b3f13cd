#include "lib/core/selection.h"

#include <cctype>

#include "lib/common/settings.h"
#include "lib/common/strings.h"
#include "lib/core/names.h"

namespace collx {

namespace {

Status bad_rule(const std::string& rule, const std::string& why) {
  return make_status(COLLX_ERR_INVALID_ARG, "COLLX_ALGO rule '%s': %s", rule.c_str(), why.c_str());
}

}  // namespace

Status AlgorithmSelector::parse(const std::string& spec, AlgorithmSelector* out) {
  AlgorithmSelector selector;
  for (const std::string& rule : split_trimmed(spec, ';')) {
    if (rule.empty()) continue;
    std::vector<std::string> fields = split_trimmed(rule, ':');
    collx_algorithm_t algorithm;
    if (!algorithm_from_name(fields.back(), &algorithm)) {
      return bad_rule(rule, "unknown algorithm '" + fields.back() +
                                "' (known: ring, recursive_doubling, rabenseifner, binomial, "
                                "pairwise, dissemination, direct, auto)");
    }
    if (fields.size() == 1) {
      // A bare algorithm applies to every collective it implements.
      bool any = false;
      for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
        auto coll = static_cast<collx_coll_t>(c);
        if (algorithm != COLLX_ALGO_AUTO && algorithm_implements(algorithm, coll)) {
          selector.rules_.push_back({coll, 0, UINT64_MAX, algorithm});
          any = true;
        }
      }
      if (!any) return bad_rule(rule, "'auto' needs a collective (e.g. allreduce:auto)");
      continue;
    }
    if (fields.size() != 2 && fields.size() != 3) {
      return bad_rule(rule, "expected ALGO, COLL:ALGO or COLL:MIN-MAX:ALGO");
    }
    collx_coll_t coll;
    if (!coll_from_name(fields[0], &coll)) {
      return bad_rule(rule, "unknown collective '" + fields[0] +
                                "' (known: allreduce, reduce_scatter, allgather, broadcast, "
                                "reduce, alltoall, barrier, send, recv)");
    }
    if (!algorithm_implements(algorithm, coll)) {
      return bad_rule(rule, std::string("algorithm '") + algorithm_name(algorithm) +
                                "' does not implement " + coll_name(coll));
    }
    uint64_t min_bytes = 0, max_bytes = UINT64_MAX;
    if (fields.size() == 3) {
      std::vector<std::string> range = split_trimmed(fields[1], '-');
      if (range.size() != 2 || !parse_size(range[0], &min_bytes) ||
          !parse_size(range[1], &max_bytes, /*allow_inf=*/true)) {
        return bad_rule(rule, "size range '" + fields[1] + "' is not MIN-MAX (e.g. 0-64K, 64K-inf)");
      }
      if (min_bytes >= max_bytes) return bad_rule(rule, "empty size range '" + fields[1] + "'");
    }
    selector.rules_.push_back({coll, min_bytes, max_bytes, algorithm});
  }
  *out = std::move(selector);
  return Status::Ok();
}

collx_algorithm_t AlgorithmSelector::choose(collx_coll_t coll, uint64_t bytes, int world_size,
                                            collx_algorithm_t forced) const {
  if (forced != COLLX_ALGO_AUTO) return forced;
  for (const Rule& rule : rules_) {
    if (rule.coll == coll && bytes >= rule.min_bytes && bytes < rule.max_bytes &&
        rule.algorithm != COLLX_ALGO_AUTO) {
      return rule.algorithm;
    }
    if (rule.coll == coll && bytes >= rule.min_bytes && bytes < rule.max_bytes) break;  // explicit auto
  }
  switch (coll) {
    case COLLX_COLL_ALLREDUCE:
      // Recursive doubling takes log2(p) rounds of the whole vector; ring takes 2(p-1)
      // rounds of 1/p of it. Below the cut-over the round count (latency) dominates.
      if (bytes < kAllreduceRingMinBytes || world_size <= 1) return COLLX_ALGO_RECURSIVE_DOUBLING;
      // Same bytes on the wire; Rabenseifner takes 2 log2(p) steps to ring's 2(p-1). From 4
      // ranks the saved steps (each a wake-up when ranks outnumber cores) win; at 2-3 ranks
      // ring measured equal or better (collx-bench, docs/design.md).
      return world_size >= 4 ? COLLX_ALGO_RABENSEIFNER : COLLX_ALGO_RING;
    case COLLX_COLL_REDUCE_SCATTER:
    case COLLX_COLL_ALLGATHER:
      return COLLX_ALGO_RING;
    case COLLX_COLL_BROADCAST:
    case COLLX_COLL_REDUCE:
      return COLLX_ALGO_BINOMIAL;
    case COLLX_COLL_ALLTOALL:
      return COLLX_ALGO_PAIRWISE;
    case COLLX_COLL_BARRIER:
      return COLLX_ALGO_DISSEMINATION;
    default:
      return COLLX_ALGO_DIRECT;
  }
}

uint64_t selection_bytes(collx_coll_t coll, size_t count, size_t element_size, int world_size) {
  uint64_t bytes = static_cast<uint64_t>(count) * element_size;
  if (coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_ALLGATHER || coll == COLLX_COLL_ALLTOALL) {
    bytes *= static_cast<uint64_t>(world_size);
  }
  return bytes;
}

}  // namespace collx
