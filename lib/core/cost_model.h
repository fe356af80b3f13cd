// The tuner's cost model: how long each algorithm should take, from three constants per
// transport (the alpha-beta-gamma model of Hockney, Thakur and Rabenseifner):
//   alpha  seconds per message (latency, wake-up, matching)
//   beta   seconds per byte moved between two ranks
//   gamma  seconds per byte reduced locally
// Defaults were measured on the project's 2-core CI machine; `collx-bench --tune FILE`
// measures them where the job runs and COLLX_TUNE_FILE loads them (tune_file.h).
//
// The model ranks candidates; it does not promise absolute times. Ties go to the candidate
// listed first (candidates()), so the simpler algorithm wins when the model cannot tell.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {

struct LinkCost {
  double alpha_us = 0;           // per message
  double beta_ns_per_byte = 0;   // per byte sent
  double gamma_ns_per_byte = 0;  // per byte reduced
};

// Built-in constants for "tcp", "shm", "ucx" (and a conservative guess for anything else).
LinkCost default_link_cost(const std::string& transport);

struct Prediction {
  collx_algorithm_t algorithm;
  double micros = 0;
  uint64_t messages = 0;  // messages one rank sends (steps x chunks)
};

// Where a communicator's ranks live, for the hierarchical all-reduce (cost_model_hierarchy.cc).
// hosts == 1 (the default): one host, and no hierarchical candidate.
struct HostLayout {
  int hosts = 1;
  int max_per_host = 1;         // ranks on the most populated host
  bool uniform = true;          // every host holds max_per_host ranks
  std::string intra_transport;  // of the per-host communicators ("shm" when allowed)
  LinkCost intra;               // its constants
};

class CostModel {
 public:
  CostModel() = default;
  CostModel(std::string transport, LinkCost cost) : transport_(std::move(transport)), cost_(cost) {}

  const std::string& transport() const { return transport_; }
  const LinkCost& cost() const { return cost_; }

  // The algorithms the automatic choice considers for `coll`, in tie-break order.
  static std::vector<collx_algorithm_t> candidates(collx_coll_t coll);

  // Predicted time of `algorithm` for a call moving `bytes` (as selection_bytes counts
  // them) among `ranks` ranks, with pipeline chunks of `chunk_bytes`.
  Prediction predict(collx_coll_t coll, collx_algorithm_t algorithm, uint64_t bytes, int ranks,
                     uint64_t chunk_bytes) const;

  // Host layout of the communicator; candidates_here() adds COLLX_ALGO_HIERARCHICAL to the
  // all-reduce candidates when its ranks span hosts and some host holds two or more.
  void set_hosts(const HostLayout& layout) { hosts_ = layout; }
  const HostLayout& hosts() const { return hosts_; }
  std::vector<collx_algorithm_t> candidates_here(collx_coll_t coll) const;
  // The transport has shared boards (transport::SharedBoards) with halves of `half_bytes`:
  // COLLX_ALGO_SHARED_MEMORY joins the candidates of all-reduce, reduce-scatter and
  // all-gather (cost_model_shared.cc). 0: it has none.
  // `direct_reads`: ranks can read each other's memory in place (cross-memory attach), so
  // large calls read peers' user buffers with one copy.
  void set_shared_boards(uint64_t half_bytes, bool direct_reads) {
    board_half_bytes_ = half_bytes;
    direct_reads_ = direct_reads;
  }
  uint64_t shared_board_half_bytes() const { return board_half_bytes_; }

  // The candidate (of candidates_here) with the smallest prediction.
  collx_algorithm_t best(collx_coll_t coll, uint64_t bytes, int ranks, uint64_t chunk_bytes) const;

 private:
  std::string transport_ = "tcp";
  LinkCost cost_ = default_link_cost("tcp");
  HostLayout hosts_;
  Prediction predict_hierarchical(uint64_t bytes, int ranks, uint64_t chunk_bytes) const;
  Prediction predict_shared_memory(collx_coll_t coll, uint64_t bytes, int ranks) const;
  uint64_t board_half_bytes_ = 0;
  bool direct_reads_ = false;
};

}  // namespace collx
