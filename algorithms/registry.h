// The algorithm registry: the one table of which algorithm implements which collective, with
// each schedule's entry function, and of every algorithm's name, description and constraints.
// Names (lib/core/names.cc), validation, COLLX_ALGO parsing, the automatic choice's candidates
// (lib/core/cost_model.cc), the dispatch (lib/core/comm_collective.cc), collx_explain and
// collx-info all read it, so adding an algorithm or a collective to one is one table edit
// (UCC keeps one such table per collective). include/collx/collx.h's enum comments and
// docs/algorithms.md (collx-info --algorithms-markdown) are checked against it by tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"
#include "collx/collx.h"

namespace collx {
namespace algo {

// Where an algorithm can run; every algorithm takes any world size (non-powers of two fold
// extra ranks in) and the reductions SUM, PROD, MIN and MAX (all commutative).
enum Needs : unsigned {
  kNeedsNothing = 0,
  // The transport's shared boards: every rank on one host over the shm transport. Forcing
  // it elsewhere is refused; the automatic choice considers it only there.
  kNeedsSharedBoards = 1u << 0,
  // Ranks on several hosts, some host with two or more: only then an automatic candidate.
  // Forced on one host it runs the ring all-reduce.
  kNeedsSeveralHosts = 1u << 1,
};

// An algorithm: its collx_algorithm_t value, its name (collx_algorithm_name, COLLX_ALGO,
// collx-bench), a one-line description and what it needs.
struct AlgorithmInfo {
  collx_algorithm_t id;
  const char* name;
  const char* description;
  unsigned needs;  // Needs bits
};

using EntryFn = Status (*)(const Context& ctx, const CollArgs& args);

// One (algorithm, collective) pair with a schedule.
struct Implementation {
  collx_algorithm_t algorithm;
  collx_coll_t coll;
  // The schedule; null where the core runs it itself: the hierarchical all-reduce builds
  // child communicators (lib/core/comm_hierarchy.cc), send and recv are point-to-point
  // requests (lib/core/comm_p2p.cc).
  EntryFn run;
  // Tie-break position among the automatic choice's candidates for `coll` (lower first,
  // the simpler algorithm wins ties); -1: never chosen automatically unless its `needs`
  // hold (shared memory, hierarchical) or a COLLX_ALGO rule names it.
  int auto_order;
  // Up to how many bytes the schedule reduces every element in one fixed order of the ranks,
  // wherever the element lies in the vector (whole vectors combined, never cut by position):
  // up to there, calls packed back to back into one message get the very bits each gets
  // alone, so a closed group may fuse them (lib/core/comm_group.cc). kNotFixedOrder where the
  // schedule cuts the vector by position (ring, trees, halving: an element's offset decides
  // which rank starts its reduction, so a packed member is reduced in another order).
  uint64_t fixed_order_bytes;
  // Runs over ring positions instead of rank numbers (Context::rank_at) where the
  // communicator has a host-grouped ring order (lib/core/comm_collective.cc): the schedule
  // reaches peers only through messages, which RequestSet maps to transport ranks, and its
  // result does not depend on which rank holds which position. Not for blocks that belong to
  // rank numbers (reduce-scatter, all-gather), nor for a schedule that reads peers' boards
  // by transport rank (shared memory); a barrier's empty messages gain nothing from it.
  bool on_ring_positions;
};

// fixed_order_bytes: never in a fixed order / at any size.
constexpr uint64_t kNotFixedOrder = 0;
constexpr uint64_t kFixedOrderAnySize = UINT64_MAX;

// Every algorithm, indexed by collx_algorithm_t (COLLX_NUM_ALGORITHMS entries; AUTO first).
const AlgorithmInfo* algorithms();
// The algorithm's entry, or null when `algorithm` is out of range.
const AlgorithmInfo* algorithm_info(int algorithm);

// Every (algorithm, collective) pair with a schedule, grouped by algorithm in enum order.
const Implementation* implementations(size_t* count);
// The pair's entry, or null when `algorithm` has no schedule for `coll` (AUTO has none: it
// stands for the choice, not for a schedule).
const Implementation* find_implementation(int algorithm, int coll);

}  // namespace algo
}  // namespace collx
