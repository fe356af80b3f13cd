// Predictions for the shared-memory collectives (algorithms/shared_memory.cc), in the terms
// of the transport's constants:
//  - a meeting (every rank waits for the last to publish a counter) costs alpha/2 per
//    doubling of the ranks: it is one cache-line hand-off when the ranks run in step, and
//    the wait for the slowest of p otherwise;
//  - copying into or out of a board moves bytes within this process's caches and memory,
//    at half the cost per byte of a message between two ranks (beta), which pays for a copy
//    on each side or a cross-memory-attach system call;
//  - reductions cost gamma per byte, as for every other algorithm;
//  - from 64 KiB per peer, where cross-memory attach works, peers' user buffers are read in
//    place: one copy per byte read and one round of two or three meetings.
#include <algorithm>
#include <cmath>

#include "algorithms/algorithm.h"
#include "lib/core/cost_model.h"

namespace collx {

namespace {
int ceil_log2_of(int p) {
  int r = 0;
  while ((1 << r) < p) ++r;
  return r;
}
}  // namespace

Prediction CostModel::predict_shared_memory(collx_coll_t coll, uint64_t bytes, int ranks) const {
  const double a = cost_.alpha_us;
  const double copy = cost_.beta_ns_per_byte * 1e-3 / 2;  // us per byte copied
  const double g = cost_.gamma_ns_per_byte * 1e-3;
  const double n = static_cast<double>(bytes);
  const int p = std::max(ranks, 1);
  Prediction out;
  out.algorithm = COLLX_ALGO_SHARED_MEMORY;
  if (p == 1 || board_half_bytes_ == 0) return out;
  const double meeting = a / 2 * ceil_log2_of(p);
  const double others = static_cast<double>(p - 1) / p;
  const double half = static_cast<double>(board_half_bytes_);
  auto rounds_of = [&](double per_round_source) { return std::max(1.0, std::ceil(per_round_source / half)); };
  double rounds = 1, meetings_per_round = 1;
  // Large pieces with cross-memory attach: peers' user buffers read in place, one copy each,
  // one round (arrived, [reduced,] done).
  const double per_peer = n / p;  // slice of an all-reduce, block of the others
  if (direct_reads_ && per_peer >= static_cast<double>(algo::kSharedMemoryDirectReadBytes)) {
    switch (coll) {
      case COLLX_COLL_ALLREDUCE:
        out.micros = 3 * meeting + 2 * n * others * copy + n * others * g;
        out.messages = 3;
        return out;
      case COLLX_COLL_REDUCE_SCATTER:
        out.micros = 2 * meeting + n * others * (copy + g);
        out.messages = 2;
        return out;
      case COLLX_COLL_ALLGATHER:
        out.micros = 2 * meeting + n * others * copy;
        out.messages = 2;
        return out;
      default:
        return out;
    }
  }
  switch (coll) {
    case COLLX_COLL_ALLREDUCE:
      if (bytes <= algo::kSharedMemorySmallAllreduceBytes) {
        // One round: copy in, then every rank reduces the whole vector from every board.
        out.micros = meeting + n * copy + (p - 1) * n * g;
        break;
      }
      rounds = rounds_of(n);
      meetings_per_round = 2;
      out.micros = n * others * copy + n * copy + n * others * g;
      break;
    case COLLX_COLL_REDUCE_SCATTER:  // bytes: the whole input
      rounds = rounds_of(n);
      out.micros = n * others * copy + n * others * g;
      break;
    case COLLX_COLL_ALLGATHER:  // bytes: the whole output
      rounds = rounds_of(n / p);
      out.micros = n / p * copy + n * others * copy;
      break;
    default:
      return out;
  }
  if (coll != COLLX_COLL_ALLREDUCE || bytes > algo::kSharedMemorySmallAllreduceBytes) {
    out.micros += rounds * meetings_per_round * meeting;
  }
  out.messages = static_cast<uint64_t>(rounds * meetings_per_round);  // meetings, not messages
  return out;
}

}  // namespace collx
