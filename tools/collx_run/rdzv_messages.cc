// Formatting and checking the rendezvous offers and plans (rdzv_messages.h).
#include "tools/collx_run/rdzv_messages.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

namespace collx_run {

using collx::Status;

namespace {

// Whitespace-separated words of one line.
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A decimal integer in [min, max], the whole word.
bool parse_int(const std::string& word, long min, long max, int* out) {
  if (word.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(word.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) return false;
  *out = static_cast<int>(value);
  return true;
}

Status malformed(const char* what, const std::string& text) {
  return collx::make_status(COLLX_ERR_PROTOCOL, "rendezvous: malformed %s '%s'", what, text.c_str());
}

}  // namespace

std::string format_offer(const Offer& offer) {
  return std::to_string(offer.nproc) + " " + std::to_string(offer.requested_node_rank) + " " +
         (offer.leader ? "1" : "0");
}

Status parse_offer(const std::string& text, Offer* out) {
  const std::vector<std::string> w = words(text);
  Offer offer;
  int leader = 0;
  if (w.size() != 3 || !parse_int(w[0], 1, INT_MAX, &offer.nproc) ||
      !parse_int(w[1], -1, INT_MAX, &offer.requested_node_rank) || !parse_int(w[2], 0, 1, &leader)) {
    return malformed("offer (expected 'NPROC NODE_RANK LEADER')", text);
  }
  offer.leader = leader == 1;
  *out = offer;
  return Status::Ok();
}

Status assign_node_ranks(std::vector<Offer>* offers, int leader_index) {
  const int n = static_cast<int>(offers->size());
  if (leader_index < 0 || leader_index >= n) {
    return collx::make_status(COLLX_ERR_INVALID_ARG, "rendezvous: leader %d is not one of the %d agents", leader_index, n);
  }
  std::set<int> taken;
  for (const Offer& o : *offers) {
    if (o.requested_node_rank < 0) continue;
    if (o.requested_node_rank >= n || !taken.insert(o.requested_node_rank).second) {
      return collx::make_status(COLLX_ERR_INVALID_ARG,
                                "--node-rank %d is repeated or not below the %d nodes that joined",
                                o.requested_node_rank, n);
    }
  }
  std::vector<int> order{leader_index};
  for (int i = 0; i < n; ++i) {
    if (i != leader_index) order.push_back(i);
  }
  int next = 0;
  for (int i : order) {
    Offer& o = (*offers)[static_cast<size_t>(i)];
    if (o.requested_node_rank >= 0) {
      o.node_rank = o.requested_node_rank;
      continue;
    }
    while (taken.count(next)) ++next;
    o.node_rank = next;
    taken.insert(next);
  }
  std::map<int, Offer*> by_node;
  for (Offer& o : *offers) by_node[o.node_rank] = &o;
  int64_t offset = 0;
  for (auto& entry : by_node) {
    entry.second->rank_offset = static_cast<int>(offset);
    offset += entry.second->nproc;
    if (offset > INT_MAX) {
      return collx::make_status(COLLX_ERR_INVALID_ARG, "rendezvous: the agents offer more than %d ranks in all", INT_MAX);
    }
  }
  return Status::Ok();
}

std::string format_plan(const std::string& store_addr, const std::vector<Offer>& offers) {
  int64_t world = 0;
  for (const Offer& o : offers) world += o.nproc;
  std::string text = std::to_string(offers.size()) + " " + std::to_string(world) + " " + store_addr + "\n";
  for (const Offer& o : offers) {
    text += std::to_string(o.node_rank) + " " + std::to_string(o.rank_offset) + " " + std::to_string(o.nproc) + "\n";
  }
  return text;
}

Status parse_plan(const std::string& text, Plan* out) {
  std::istringstream in(text);
  std::string line;
  int nnodes = 0;
  Plan plan;
  std::vector<std::string> w;
  if (!std::getline(in, line) || (w = words(line)).size() != 3 || !parse_int(w[0], 1, INT_MAX, &nnodes) ||
      !parse_int(w[1], 1, INT_MAX, &plan.world_size)) {
    return malformed("plan (expected 'NNODES WORLD STORE_ADDR' first)", text);
  }
  plan.store_addr = w[2];
  std::map<int, const Offer*> by_node;
  while (std::getline(in, line)) {
    if (plan.nodes.size() == static_cast<size_t>(nnodes)) return malformed("plan (more lines than nodes)", text);
    Offer node;
    if ((w = words(line)).size() != 3 || !parse_int(w[0], 0, nnodes - 1, &node.node_rank) ||
        !parse_int(w[1], 0, INT_MAX, &node.rank_offset) || !parse_int(w[2], 1, INT_MAX, &node.nproc)) {
      return malformed("plan line (expected 'NODE_RANK RANK_OFFSET NPROC')", line);
    }
    plan.nodes.push_back(node);
  }
  if (plan.nodes.size() != static_cast<size_t>(nnodes)) return malformed("plan (fewer lines than nodes)", text);
  for (const Offer& node : plan.nodes) {
    if (!by_node.emplace(node.node_rank, &node).second) return malformed("plan (a node rank twice)", text);
  }
  // Node ranks are 0..N-1 (N distinct values below N); their ranks follow one another.
  int64_t next = 0;
  for (const auto& entry : by_node) {
    if (entry.second->rank_offset != next) return malformed("plan (rank offsets leave a gap or overlap)", text);
    next += entry.second->nproc;
  }
  if (next != plan.world_size) return malformed("plan (the nodes' ranks do not add up to the world size)", text);
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace collx_run
