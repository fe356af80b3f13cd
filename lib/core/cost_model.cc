#include "lib/core/cost_model.h"

#include <algorithm>
#include <cmath>

#include "algorithms/registry.h"

namespace collx {
namespace {

int floor_log2(int p) {
  int k = 0;
  while ((2 << k) <= p) ++k;
  return k;
}

int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

uint64_t chunks_of(double bytes, uint64_t chunk_bytes) {
  if (bytes <= 0 || chunk_bytes == 0) return 1;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(bytes / static_cast<double>(chunk_bytes))));
}

}  // namespace

LinkCost default_link_cost(const std::string& transport) {
  // Measured with `collx-bench --tune` on the 2-core CI VM (docs/tuning.md), rounded.
  // gamma is the float32 sum of two arrays that do not fit in cache (memory bound).
  if (transport == "shm") return LinkCost{2.0, 0.19, 0.17};
  if (transport == "ucx") return LinkCost{10.0, 0.45, 0.17};
  return LinkCost{10.0, 0.40, 0.17};  // tcp over loopback; a network is rarely faster per byte
}

std::vector<collx_algorithm_t> CostModel::candidates(collx_coll_t coll) {
  // The registry's automatic candidates of `coll`, by their tie-break position.
  std::vector<const algo::Implementation*> ranked;
  size_t count = 0;
  const algo::Implementation* table = algo::implementations(&count);
  for (size_t i = 0; i < count; ++i) {
    if (table[i].coll == coll && table[i].auto_order >= 0) ranked.push_back(&table[i]);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const algo::Implementation* a, const algo::Implementation* b) {
    return a->auto_order < b->auto_order;
  });
  std::vector<collx_algorithm_t> out;
  for (const algo::Implementation* entry : ranked) out.push_back(entry->algorithm);
  return out;
}

Prediction CostModel::predict(collx_coll_t coll, collx_algorithm_t algorithm, uint64_t bytes, int ranks,
                              uint64_t chunk_bytes) const {
  const double a = cost_.alpha_us;
  const double b = cost_.beta_ns_per_byte * 1e-3;  // us per byte
  const double g = cost_.gamma_ns_per_byte * 1e-3;
  const double n = static_cast<double>(bytes);
  const int p = std::max(ranks, 1);
  Prediction out;
  out.algorithm = algorithm;
  if (p == 1) return out;  // nothing moves (a local copy at most)

  // Non-powers of two: the extra ranks fold into partners first and get the result last
  // (one whole-vector message each way, one extra reduction).
  const int p2 = 1 << floor_log2(p);
  const bool folds = p2 != p;
  const int rounds = floor_log2(p);
  switch (algorithm) {
    case COLLX_ALGO_RING: {
      const double share = n / p;
      const uint64_t chunks = chunks_of(share, chunk_bytes);
      int steps = p - 1;  // reduce-scatter or all-gather half
      double reduce_bytes = coll == COLLX_COLL_ALLGATHER ? 0 : share * (p - 1);
      if (coll == COLLX_COLL_ALLREDUCE) steps = 2 * (p - 1);
      // Pipelined: a chunk's message overlaps the previous chunk's reduction, so extra
      // chunks cost about nothing beyond each step's first message.
      out.micros = steps * a + steps * share * b + reduce_bytes * g;
      out.messages = static_cast<uint64_t>(steps) * chunks;
      break;
    }
    case COLLX_ALGO_RECURSIVE_DOUBLING: {
      const int steps = rounds + (folds ? 2 : 0);
      out.micros = steps * (a + n * b) + (rounds + (folds ? 1 : 0)) * n * g;
      out.messages = static_cast<uint64_t>(steps);
      break;
    }
    case COLLX_ALGO_RABENSEIFNER: {
      const int steps = 2 * rounds + (folds ? 2 : 0);
      const double moved = 2.0 * (p2 - 1) / p2 * n + (folds ? 2 * n : 0);
      const double reduced = static_cast<double>(p2 - 1) / p2 * n + (folds ? n : 0);
      out.micros = steps * a + moved * b + reduced * g;
      out.messages = static_cast<uint64_t>(steps);
      break;
    }
    case COLLX_ALGO_DOUBLE_TREE: {
      // Each half climbs floor(log2 p) levels and comes back down; pipelined, the latency is
      // those 2 log2 p hops of one chunk each, and the bandwidth term is what the busiest
      // rank sends: n/2 up plus n/2 to each of two children in the tree where it is interior,
      // n/2 up as a leaf of the other (n in all at 2 ranks, where nobody has two children).
      // It reduces two children's halves into its own: n bytes.
      const int depth = rounds;
      const double chunk = std::min(n / 2, static_cast<double>(std::max<uint64_t>(chunk_bytes, 1)));
      const double sent = p == 2 ? n : 2 * n;
      out.micros = 2 * depth * (a + chunk * b) + sent * b + (p == 2 ? n / 2 : n) * g;
      out.messages = static_cast<uint64_t>(p == 2 ? 2 : 4) * chunks_of(n / 2, chunk_bytes);  // sent per rank
      break;
    }
    case COLLX_ALGO_BINOMIAL: {
      const int steps = ceil_log2(p);
      out.micros = steps * (a + n * b) + (coll == COLLX_COLL_REDUCE ? steps * n * g : 0);
      out.messages = static_cast<uint64_t>(steps);
      break;
    }
    case COLLX_ALGO_PAIRWISE:
      out.micros = (p - 1) * (a + n / p * b);
      out.messages = static_cast<uint64_t>(p - 1);
      break;
    case COLLX_ALGO_SHARED_MEMORY:  // cost_model_shared.cc
      return predict_shared_memory(coll, bytes, p);
    case COLLX_ALGO_HIERARCHICAL:  // cost_model_hierarchy.cc
      return predict_hierarchical(bytes, p, chunk_bytes);
    case COLLX_ALGO_DISSEMINATION:
      out.micros = ceil_log2(p) * a;
      out.messages = static_cast<uint64_t>(ceil_log2(p));
      break;
    case COLLX_ALGO_DIRECT:
      if (coll == COLLX_COLL_GATHER || coll == COLLX_COLL_SCATTER || coll == COLLX_COLL_GATHERV ||
          coll == COLLX_COLL_SCATTERV) {
        // `bytes` is the root's whole buffer; the root moves all but its own block.
        out.micros = (p - 1) * a + n * (p - 1) / p * b;
        out.messages = static_cast<uint64_t>(p - 1);
        break;
      }
      [[fallthrough]];
    default:
      out.micros = (p - 1) * (a + n * b);
      out.messages = static_cast<uint64_t>(p - 1);
      break;
  }
  return out;
}

collx_algorithm_t CostModel::best(collx_coll_t coll, uint64_t bytes, int ranks, uint64_t chunk_bytes) const {
  collx_algorithm_t chosen = COLLX_ALGO_AUTO;
  double best_us = 0;
  for (collx_algorithm_t algorithm : candidates_here(coll)) {
    const double us = predict(coll, algorithm, bytes, ranks, chunk_bytes).micros;
    if (chosen == COLLX_ALGO_AUTO || us < best_us) {
      chosen = algorithm;
      best_us = us;
    }
  }
  return chosen;
}

}  // namespace collx
