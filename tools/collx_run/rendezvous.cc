#include "tools/collx_run/rendezvous.h"

#include <cstdlib>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/host_port.h"
#include "tools/collx_run/rdzv_messages.h"

namespace collx_run {

using collx::Bytes;
using collx::Deadline;
using collx::Status;

namespace {

Bytes to_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string to_text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

bool split_endpoint(const std::string& endpoint, std::string* host, int* port) {
  collx::HostPort parsed;
  if (!collx::parse_host_port(endpoint, "endpoint", &parsed).ok()) return false;
  // Brackets back on an IPv6 literal: the host is joined to ports with ':' again.
  *host = parsed.host.find(':') != std::string::npos ? "[" + parsed.host + "]" : parsed.host;
  *port = parsed.port;
  return true;
}

Status Rendezvous::open(const RunOptions& options) {
  options_ = options;
  const std::string endpoint = options.endpoint.empty() ? "127.0.0.1:0" : options.endpoint;
  int port = 0;
  if (!split_endpoint(endpoint, &host_, &port)) {
    return collx::make_status(COLLX_ERR_INVALID_ARG, "--rdzv-endpoint '%s' is not HOST:PORT", endpoint.c_str());
  }
  const Deadline deadline = Deadline::after_ms(options.rdzv_timeout_ms);
  std::string address = endpoint;
  if (options.node_rank <= 0) {
    // Any failure to listen (port taken, or the host is another machine's address) means
    // another agent hosts it.
    if (collx::start_tcp_store_server(endpoint, &server_).ok()) {
      address = host_ + ":" + std::to_string(server_->port());
    } else {
      server_.reset();
    }
  }
  if (!server_ && port == 0) {
    return collx::make_status(COLLX_ERR_SYSTEM, "cannot host the rendezvous store at %s", endpoint.c_str());
  }
  COLLX_RETURN_IF_ERROR(collx::connect_tcp_store(address, deadline, &store_)
                            .with_context("rendezvous store " + address + ": "));
  return collx::connect_tcp_store(address, deadline, &watch_store_);
}

// Leader: waits for MIN agents (then up to MAX during the last call), assigns ranks, starts
// this attempt's store and publishes the plan.
Status Rendezvous::lead(const std::string& prefix, int* nnodes) {
  const Deadline deadline = Deadline::after_ms(options_.rdzv_timeout_ms);
  std::vector<std::string> first;
  for (int i = 0; i < options_.min_nodes; ++i) first.push_back(prefix + "agent/" + std::to_string(i));
  Status st = store_->wait(first, deadline);
  if (!st.ok()) {
    return st.with_context("rendezvous: fewer than " + std::to_string(options_.min_nodes) +
                           " agents joined within --rdzv-timeout: ");
  }
  int count = options_.min_nodes;
  while (count < options_.max_nodes) {
    const Deadline last_call = Deadline::after_ms(options_.last_call_ms).min(deadline);
    if (!store_->wait({prefix + "agent/" + std::to_string(count)}, last_call).ok()) break;
    ++count;
  }
  // Close the rendezvous: an agent joining from now on reads a plan without itself.
  std::vector<Offer> offers(static_cast<size_t>(count));
  int leader_index = -1;
  for (int i = 0; i < count; ++i) {
    Bytes value;
    COLLX_RETURN_IF_ERROR(store_->get(prefix + "agent/" + std::to_string(i), &value, deadline));
    COLLX_RETURN_IF_ERROR(parse_offer(to_text(value), &offers[static_cast<size_t>(i)])
                              .with_context("agent " + std::to_string(i) + ": "));
    if (offers[static_cast<size_t>(i)].leader) leader_index = i;
  }
  COLLX_RETURN_IF_ERROR(assign_node_ranks(&offers, leader_index < 0 ? 0 : leader_index));

  attempt_server_.reset();  // the previous attempt's ranks are gone
  COLLX_RETURN_IF_ERROR(collx::start_tcp_store_server(host_ + ":0", &attempt_server_)
                            .with_context("cannot host the ranks' store on " + host_ + ": "));
  const std::string plan = format_plan(host_ + ":" + std::to_string(attempt_server_->port()), offers);
  *nnodes = count;
  return store_->set(prefix + "plan", to_bytes(plan));
}

Status Rendezvous::join(int attempt, AttemptPlan* plan) {
  const std::string prefix = "collx-run/" + options_.run_id + "/" + std::to_string(attempt) + "/";
  const Deadline deadline = Deadline::after_ms(options_.rdzv_timeout_ms);
  int64_t joined = 0;
  COLLX_RETURN_IF_ERROR(store_->add(prefix + "joined", 1, &joined));
  const int index = static_cast<int>(joined - 1);
  Offer mine;
  mine.nproc = options_.nproc_per_node;
  mine.requested_node_rank = options_.node_rank;
  mine.leader = leader();
  const std::string offer = format_offer(mine);
  COLLX_RETURN_IF_ERROR(store_->set(prefix + "agent/" + std::to_string(index), to_bytes(offer)));
  if (leader()) {
    int nnodes = 0;
    COLLX_RETURN_IF_ERROR(lead(prefix, &nnodes));
  }
  Bytes value;
  Status st = store_->get(prefix + "plan", &value, deadline);
  if (!st.ok()) return st.with_context("rendezvous: no plan for attempt " + std::to_string(attempt) + ": ");
  Plan agreed;
  COLLX_RETURN_IF_ERROR(parse_plan(to_text(value), &agreed));
  if (index >= static_cast<int>(agreed.nodes.size())) {
    return collx::make_status(COLLX_ERR_INVALID_USAGE,
                              "rendezvous of attempt %d closed with %zu nodes before this agent joined",
                              attempt, agreed.nodes.size());
  }
  const Offer& node = agreed.nodes[static_cast<size_t>(index)];
  AttemptPlan p;
  p.attempt = attempt;
  p.key_prefix = prefix;
  p.nnodes = static_cast<int>(agreed.nodes.size());
  p.world_size = agreed.world_size;
  p.store_addr = agreed.store_addr;
  p.node_rank = node.node_rank;
  p.rank_offset = node.rank_offset;
  p.local_size = node.nproc;
  *plan = p;
  return Status::Ok();
}

}  // namespace collx_run
