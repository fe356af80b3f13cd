// Algorithm selection: COLLX_ALGO overrides, else the cost model (cost_model.h).
//
// COLLX_ALGO grammar (rules separated by ';', the first matching rule wins):
//   ALGO                    every collective ALGO implements, every size
//   COLL:ALGO               that collective, every size
//   COLL:MIN-MAX:ALGO       that collective when MIN <= bytes < MAX (K/M/G suffixes, 'inf')
// `bytes` is the total buffer size, as the size column of collx-bench: count * element size,
// times the number of ranks for reduce_scatter, allgather, alltoall, gather and scatter
// (allgatherv's count is already the total of its counts).
// Unknown collectives or algorithms, or an algorithm that does not implement the collective,
// are errors naming the rule: a typo never silently falls back to the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "lib/common/status.h"
#include "lib/core/cost_model.h"

namespace collx {

class AlgorithmSelector {
 public:
  static Status parse(const std::string& spec, AlgorithmSelector* out);

  // `forced` (from the call's options) wins when not AUTO; then the first matching rule;
  // then the cost model's cheapest candidate.
  collx_algorithm_t choose(collx_coll_t coll, uint64_t bytes, int world_size, collx_algorithm_t forced,
                           const CostModel& model, uint64_t chunk_bytes) const;
  // The same with the built-in TCP model and the default chunk.
  collx_algorithm_t choose(collx_coll_t coll, uint64_t bytes, int world_size,
                           collx_algorithm_t forced) const;

  // The text of the COLLX_ALGO rule that decides (coll, bytes), or "" when none does.
  std::string matching_rule(collx_coll_t coll, uint64_t bytes) const;

 private:
  struct Rule {
    collx_coll_t coll;
    uint64_t min_bytes;  // inclusive
    uint64_t max_bytes;  // exclusive; UINT64_MAX = no bound
    collx_algorithm_t algorithm;
    std::string text;  // as written in COLLX_ALGO, for explanations
  };
  const Rule* find_rule(collx_coll_t coll, uint64_t bytes) const;
  std::vector<Rule> rules_;
};

// Total buffer bytes of a call, as the selector and collx-bench count them.
uint64_t selection_bytes(collx_coll_t coll, size_t count, size_t element_size, int world_size);

}  // namespace collx
