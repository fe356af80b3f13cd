// The cost model's hierarchical all-reduce (COLLX_ALGO_HIERARCHICAL, lib/core/comm_hierarchy.cc):
// the parts inside a host are predicted with the per-host communicators' constants (shm when
// allowed), the part across hosts with this model's own (the communicator's transport, tcp).
//
// Every host holding L ranks (H hosts), n bytes:
//   ring reduce-scatter inside the host     (L-1)(alpha_i + n/L beta_i) + (L-1)/L n gamma_i
//   all-reduce of n/L bytes among H ranks   cheapest flat candidate with the inter constants
//   ring all-gather inside the host         (L-1)(alpha_i + n/L beta_i)
// The L all-reduces across hosts run at once, one per local rank: the model assumes each has
// its own path (one NIC per rank, or a NIC faster than one rank's stream), as NCCL does.
// Hosts holding different numbers of ranks (largest L):
//   binomial reduce to the host's first rank, all-reduce of n bytes among the H leaders,
//   binomial broadcast inside the host.
#include <algorithm>

#include "algorithms/registry.h"
#include "lib/core/cost_model.h"

namespace collx {

std::vector<collx_algorithm_t> CostModel::candidates_here(collx_coll_t coll) const {
  std::vector<collx_algorithm_t> out = candidates(coll);
  // Then the registry's algorithms whose needs this communicator meets, in enum order.
  unsigned met = algo::kNeedsNothing;
  if (board_half_bytes_ > 0) met |= algo::kNeedsSharedBoards;  // cost_model_shared.cc
  if (hosts_.hosts > 1 && hosts_.max_per_host > 1) met |= algo::kNeedsSeveralHosts;
  size_t count = 0;
  const algo::Implementation* table = algo::implementations(&count);
  for (size_t i = 0; i < count; ++i) {
    const unsigned needs = algo::algorithm_info(table[i].algorithm)->needs;
    if (table[i].coll == coll && table[i].auto_order < 0 && needs != algo::kNeedsNothing && (needs & ~met) == 0) {
      out.push_back(table[i].algorithm);
    }
  }
  return out;
}

Prediction CostModel::predict_hierarchical(uint64_t bytes, int ranks, uint64_t chunk_bytes) const {
  const int hosts = hosts_.hosts;
  const int local = hosts_.max_per_host;
  if (hosts <= 1 || local <= 1) {
    // Forced on one host, or one rank per host: it runs the ring all-reduce (comm_hierarchy.cc).
    Prediction ring = predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, bytes, ranks, chunk_bytes);
    ring.algorithm = COLLX_ALGO_HIERARCHICAL;
    return ring;
  }
  const CostModel intra(hosts_.intra_transport, hosts_.intra);
  // The cheapest flat all-reduce among the hosts' ranks (what the cross-host communicator's
  // own automatic choice picks: it has this model's transport and no host layout).
  const CostModel inter(transport_, cost_);
  auto across = [&](uint64_t n) {
    Prediction best;
    bool first = true;
    for (collx_algorithm_t algorithm : candidates(COLLX_COLL_ALLREDUCE)) {
      const Prediction p = inter.predict(COLLX_COLL_ALLREDUCE, algorithm, n, hosts, chunk_bytes);
      if (first || p.micros < best.micros) best = p;
      first = false;
    }
    return best;
  };
  Prediction out;
  out.algorithm = COLLX_ALGO_HIERARCHICAL;
  Prediction parts[3];
  if (hosts_.uniform) {
    // Reduce-scatter and all-gather count the whole buffer (selection_bytes: count x L).
    parts[0] = intra.predict(COLLX_COLL_REDUCE_SCATTER, COLLX_ALGO_RING, bytes, local, chunk_bytes);
    parts[1] = across(bytes / static_cast<uint64_t>(local));
    parts[2] = intra.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_RING, bytes, local, chunk_bytes);
  } else {
    parts[0] = intra.predict(COLLX_COLL_REDUCE, COLLX_ALGO_BINOMIAL, bytes, local, chunk_bytes);
    parts[1] = across(bytes);
    parts[2] = intra.predict(COLLX_COLL_BROADCAST, COLLX_ALGO_BINOMIAL, bytes, local, chunk_bytes);
  }
  for (const Prediction& p : parts) {
    out.micros += p.micros;
    out.messages += p.messages;
  }
  return out;
}

}  // namespace collx
