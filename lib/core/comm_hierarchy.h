// Hierarchical all-reduce (COLLX_ALGO_HIERARCHICAL): a communicator's host layout and the
// internal child communicators the algorithm runs over (lib/core/comm_hierarchy.cc).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/common/status.h"

namespace collx {

class Communicator;

struct Hierarchy {
  // Layout, from the host identities every rank exchanged at creation (the same on every
  // rank). Hosts are numbered in the order of their lowest rank; a host's ranks in rank order.
  int hosts = 1;
  int host = 0;   // this rank's host
  int local = 0;  // this rank's index among its host's ranks
  int max_per_host = 1;
  bool uniform = true;  // every host holds max_per_host ranks
  std::vector<std::vector<int>> members;  // ranks of each host
  // Spans hosts with some host holding 2+ ranks: otherwise the algorithm is the ring all-reduce.
  bool applies() const { return hosts > 1 && max_per_host > 1; }

  // Child communicators, made by the first hierarchical all-reduce (every rank decides the
  // same: the algorithm is part of the call's OpDesc, and the layout is shared). Internal:
  // never handed to the user, aborted and destroyed with the parent.
  //   intra: this host's ranks (null when it is alone on its host); single-host, so shm.
  //   cross: every host's rank of this rank's local index (equal hosts), or the hosts' first
  //          ranks (unequal hosts; null on the other ranks).
  std::mutex mutex;  // guards the three fields below against abort() from another thread
  bool built = false;
  std::shared_ptr<Communicator> intra;
  std::shared_ptr<Communicator> cross;

  void fill(const std::vector<std::string>& host_of_rank, int rank);
  std::vector<std::shared_ptr<Communicator>> children();
};

}  // namespace collx
