// Algorithm selection: the default choice by collective and size, and COLLX_ALGO overrides.
//
// COLLX_ALGO grammar (rules separated by ';', the first matching rule wins):
//   ALGO                    every collective ALGO implements, every size
//   COLL:ALGO               that collective, every size
//   COLL:MIN-MAX:ALGO       that collective when MIN <= bytes < MAX (K/M/G suffixes, 'inf')
// `bytes` is the total buffer size, as the size column of collx-bench: count * element size,
// times the number of ranks for reduce_scatter, allgather and alltoall.
// Unknown collectives or algorithms, or an algorithm that does not implement the collective,
// are errors naming the rule: a typo never silently falls back to the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "lib/common/status.h"

namespace collx {

class AlgorithmSelector {
 public:
  static Status parse(const std::string& spec, AlgorithmSelector* out);

  // `forced` (from the call's options) wins when not AUTO; then the first matching rule;
  // then the default by size.
  collx_algorithm_t choose(collx_coll_t coll, uint64_t bytes, int world_size,
                           collx_algorithm_t forced) const;

  // Default allreduce cut-over: recursive doubling below, ring from here up.
  static constexpr uint64_t kAllreduceRingMinBytes = 256u << 10;

 private:
  struct Rule {
    collx_coll_t coll;
    uint64_t min_bytes;  // inclusive
    uint64_t max_bytes;  // exclusive; UINT64_MAX = no bound
    collx_algorithm_t algorithm;
  };
  std::vector<Rule> rules_;
};

// Total buffer bytes of a call, as the selector and collx-bench count them.
uint64_t selection_bytes(collx_coll_t coll, size_t count, size_t element_size, int world_size);

}  // namespace collx
