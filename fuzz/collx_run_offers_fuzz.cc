// libFuzzer target for collx-run's rendezvous messages (tools/collx_run/rdzv_messages.h): the
// leader reads every agent's offer from the rendezvous store and every agent reads the plan,
// so these texts come from other processes. The input is read twice: as one offer per line
// (the offers of one rendezvous) and as a plan. Properties: no crash; a refusal says why;
// offers that parse re-format to an equal offer; assigned node ranks are 0..N-1 once each
// with each node's ranks following the previous node's; the plan made from them parses back
// to the same places; and any plan that parses re-formats to a plan that parses the same.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tools/collx_run/rdzv_messages.h"

using namespace collx_run;

namespace {

constexpr size_t kMaxOffers = 64;

bool same_place(const Offer& a, const Offer& b) {
  return a.node_rank == b.node_rank && a.rank_offset == b.rank_offset && a.nproc == b.nproc;
}

void check_plan_round_trip(const std::string& store_addr, const std::vector<Offer>& nodes, int world) {
  Plan plan;
  if (!parse_plan(format_plan(store_addr, nodes), &plan).ok()) std::abort();
  if (plan.store_addr != store_addr || plan.world_size != world || plan.nodes.size() != nodes.size()) std::abort();
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!same_place(plan.nodes[i], nodes[i])) std::abort();
}

void check_offers(const std::string& text) {
  std::vector<Offer> offers;
  int leader_index = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line) && offers.size() < kMaxOffers;) {
    Offer offer;
    collx::Status st = parse_offer(line, &offer);
    if (!st.ok()) {
      if (st.message().empty()) std::abort();
      continue;
    }
    Offer again;
    if (!parse_offer(format_offer(offer), &again).ok() || again.nproc != offer.nproc ||
        again.requested_node_rank != offer.requested_node_rank || again.leader != offer.leader)
      std::abort();
    if (offer.leader) leader_index = static_cast<int>(offers.size());
    offers.push_back(offer);
  }
  if (offers.empty()) return;
  collx::Status st = assign_node_ranks(&offers, leader_index);
  if (!st.ok()) {
    if (st.message().empty()) std::abort();
    return;
  }
  std::vector<const Offer*> by_node(offers.size(), nullptr);
  for (const Offer& o : offers) {
    if (o.node_rank < 0 || static_cast<size_t>(o.node_rank) >= offers.size() || by_node[o.node_rank]) std::abort();
    if (o.requested_node_rank >= 0 && o.node_rank != o.requested_node_rank) std::abort();
    by_node[o.node_rank] = &o;
  }
  int64_t next = 0;
  for (const Offer* o : by_node) {
    if (o->rank_offset != next) std::abort();
    next += o->nproc;
  }
  check_plan_round_trip("host:1234", offers, static_cast<int>(next));
}

void check_plan(const std::string& text) {
  Plan plan;
  collx::Status st = parse_plan(text, &plan);
  if (!st.ok()) {
    if (st.message().empty()) std::abort();
    return;
  }
  check_plan_round_trip(plan.store_addr, plan.nodes, plan.world_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_offers(text);
  check_plan(text);
  return 0;
}
