// The agents' rendezvous messages, text values in the rendezvous store (rendezvous.h):
//   offer  "NPROC NODE_RANK LEADER"      one per agent, under <prefix>agent/<join index>
//   plan   "NNODES WORLD STORE_ADDR\n"   the leader's answer, under <prefix>plan, then one
//          "NODE_RANK RANK_OFFSET NPROC\n" line per agent in join order
// Every agent of the job (and, without a job token, anyone who reaches the store) can write
// these keys, so the parsers check every number and refuse anything else with a message
// naming the value.
#pragma once

#include <string>
#include <vector>

#include "lib/common/status.h"

namespace collx_run {

// One agent's offer, and the node rank and first global rank the leader gives it.
struct Offer {
  int nproc = 0;                 // ranks it starts (>= 1)
  int requested_node_rank = -1;  // --node-rank, or -1: any
  bool leader = false;           // it hosts the rendezvous store
  int node_rank = -1;            // assigned by assign_node_ranks
  int rank_offset = 0;           // global rank of its local rank 0
};

// The plan of one attempt: the ranks' store and each agent's place, in join order.
struct Plan {
  int world_size = 0;
  std::string store_addr;
  std::vector<Offer> nodes;  // nproc, node_rank and rank_offset set
};

std::string format_offer(const Offer& offer);
collx::Status parse_offer(const std::string& text, Offer* out);

// Node ranks: requested ones are kept; the rest fill the free ranks in join order, the
// leader (join index `leader_index`) first so that global rank 0 runs beside the store.
// Then rank offsets in node-rank order. COLLX_ERR_INVALID_ARG when a requested node rank is
// repeated or not below the number of offers, or the ranks add up to more than INT_MAX.
collx::Status assign_node_ranks(std::vector<Offer>* offers, int leader_index);

// The plan text for offers that went through assign_node_ranks.
std::string format_plan(const std::string& store_addr, const std::vector<Offer>& offers);
// Checks that node ranks are 0..N-1 once each and that each agent's ranks lie inside the
// world, one after another in node-rank order.
collx::Status parse_plan(const std::string& text, Plan* out);

}  // namespace collx_run
