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
      return bad_rule(rule, "unknown algorithm '" + fields.back() + "' (known: " + algorithm_names() + ")");
    }
    if (fields.size() == 1) {
      // A bare algorithm applies to every collective it implements.
      bool any = false;
      for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
        auto coll = static_cast<collx_coll_t>(c);
        if (algorithm != COLLX_ALGO_AUTO && algorithm_implements(algorithm, coll)) {
          selector.rules_.push_back({coll, 0, UINT64_MAX, algorithm, rule});
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
      return bad_rule(rule, "unknown collective '" + fields[0] + "' (known: " + coll_names() + ")");
    }
    if (!algorithm_implements(algorithm, coll)) return bad_rule(rule, not_implemented(algorithm, coll));
    uint64_t min_bytes = 0, max_bytes = UINT64_MAX;
    if (fields.size() == 3) {
      std::vector<std::string> range = split_trimmed(fields[1], '-');
      if (range.size() != 2 || !parse_size(range[0], &min_bytes) ||
          !parse_size(range[1], &max_bytes, /*allow_inf=*/true)) {
        return bad_rule(rule, "size range '" + fields[1] + "' is not MIN-MAX (e.g. 0-64K, 64K-inf)");
      }
      if (min_bytes >= max_bytes) return bad_rule(rule, "empty size range '" + fields[1] + "'");
    }
    selector.rules_.push_back({coll, min_bytes, max_bytes, algorithm, rule});
  }
  *out = std::move(selector);
  return Status::Ok();
}

const AlgorithmSelector::Rule* AlgorithmSelector::find_rule(collx_coll_t coll, uint64_t bytes) const {
  for (const Rule& rule : rules_) {
    if (rule.coll == coll && bytes >= rule.min_bytes && bytes < rule.max_bytes) return &rule;
  }
  return nullptr;
}

std::string AlgorithmSelector::matching_rule(collx_coll_t coll, uint64_t bytes) const {
  const Rule* rule = find_rule(coll, bytes);
  return rule ? rule->text : std::string();
}

collx_algorithm_t AlgorithmSelector::choose(collx_coll_t coll, uint64_t bytes, int world_size,
                                            collx_algorithm_t forced, const CostModel& model,
                                            uint64_t chunk_bytes) const {
  if (forced != COLLX_ALGO_AUTO) return forced;
  // The first rule covering (coll, bytes) decides; an explicit 'auto' rule hands the
  // choice back to the model.
  const Rule* rule = find_rule(coll, bytes);
  if (rule != nullptr && rule->algorithm != COLLX_ALGO_AUTO) return rule->algorithm;
  return model.best(coll, bytes, world_size, chunk_bytes);
}

collx_algorithm_t AlgorithmSelector::choose(collx_coll_t coll, uint64_t bytes, int world_size,
                                            collx_algorithm_t forced) const {
  static const CostModel kTcp("tcp", default_link_cost("tcp"));
  return choose(coll, bytes, world_size, forced, kTcp, 512u << 10);
}

uint64_t selection_bytes(collx_coll_t coll, size_t count, size_t element_size, int world_size) {
  uint64_t bytes = static_cast<uint64_t>(count) * element_size;
  if (coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_ALLGATHER || coll == COLLX_COLL_ALLTOALL ||
      coll == COLLX_COLL_GATHER || coll == COLLX_COLL_SCATTER) {
    bytes *= static_cast<uint64_t>(world_size);
  }
  return bytes;
}

}  // namespace collx
