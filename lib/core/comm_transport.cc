// Which transport a communicator uses, and its creation.
//
// One transport per communicator, chosen from what the ranks share and what is allowed
// (COLLX_TRANSPORTS / config->transports), first match wins (the order of the table in
// transports/factory.cc, which knows each transport's parameters; the core knows none):
//   * every rank on this host, shm allowed  -> shared memory (transports/shm)
//   * tcp allowed                           -> TCP (transports/tcp)
//   * ucx allowed and built                 -> UCX (transports/ucx)
// UCX comes after TCP because Debian's UCX reaches other hosts only through its own TCP
// transport, which measured no faster than collx's; on an InfiniBand cluster, ask for it
// with COLLX_TRANSPORTS=ucx (or ucx,shm to keep shared memory inside a host).
// A job that spans hosts still gets shared memory inside each host through the hierarchical
// algorithms, which run over a per-host child communicator (itself single-host, so shm) and
// a leaders' communicator (TCP). Routing individual peers of one communicator over
// different transports would need one wait across several engines; keeping one transport per
// communicator keeps every wait a single blocking call with one deadline.
#include <string>

#include "lib/common/host_port.h"
#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/core/comm.h"
#include "lib/core/host_identity.h"
#include "lib/core/names.h"
#include "lib/core/nic_choice.h"
#include "lib/topo/topo_decide.h"
#include "lib/topo/topo_load.h"
#include "transports/factory.h"

namespace collx {
namespace {

std::string allowed_names(uint32_t mask) {
  std::string out;
  const struct { uint32_t bit; const char* name; } kAll[] = {
      {COLLX_TRANSPORT_TCP, "tcp"}, {COLLX_TRANSPORT_SHM, "shm"},
      {COLLX_TRANSPORT_UCX, "ucx"}, {COLLX_TRANSPORT_NCCL, "nccl"}};
  for (const auto& t : kAll) {
    if (!(mask & t.bit)) continue;
    if (!out.empty()) out += ",";
    out += t.name;
  }
  return out.empty() ? std::string("none") : out;
}

}  // namespace

Status Communicator::create_transport(transport::Bootstrap* bootstrap, bool single_host, Deadline deadline) {
  const uint32_t allowed = settings_.transports;
  transport::TransportSetup setup;
  setup.rank = rank_;
  setup.size = size_;
  setup.comm_id = fnv1a64(prefix_.data(), prefix_.size());
  setup.comm_name = name_;
  setup.bootstrap = bootstrap;
  setup.describe = describe_op;
  setup.deadline = deadline;
  setup.single_host = single_host;
  if (!job_.store_addr.empty()) setup.route_to_host = host_of(job_.store_addr);
  setup.pick_interface = [this](const std::string& route_ip) { return nearest_interface(route_ip); };

  std::string not_built;
  size_t count = 0;
  const transport::TransportFactory* factories = transport::transport_factories(&count);
  for (size_t i = 0; i < count; ++i) {
    const transport::TransportFactory& f = factories[i];
    if (!(allowed & f.kind) || (f.single_host_only && !single_host)) continue;
    if (!f.built()) {
      not_built += std::string(" (this library was built without ") + f.name + ")";
      continue;
    }
    COLLX_RETURN_IF_ERROR(f.create(setup, &transport_));
    use_cost_model();
    COLLX_INFO(INIT, "communicator '%s': %s transport (%d ranks%s)", name_.c_str(), f.name, size_,
               single_host ? ", all on this host" : "");
    return Status::Ok();
  }
  return make_status(COLLX_ERR_UNSUPPORTED,
                     "no usable transport: the allowed set (COLLX_TRANSPORTS or config->transports) is "
                     "'%s'; %s%s", allowed_names(allowed).c_str(),
                     single_host ? "shm, tcp or ucx is needed here" : "ranks span several hosts, which needs tcp or ucx",
                     not_built.c_str());
}

void Communicator::use_cost_model() {
  const std::string name = transport_->name();
  auto tuned = settings_.tuned.find(name);
  model_ = CostModel(name, tuned != settings_.tuned.end() ? tuned->second : default_link_cost(name));
  if (transport::SharedBoards* boards = transport_->shared_boards()) model_.set_shared_boards(boards->half_bytes(), boards->can_read_peers());
}

// Rings cross host boundaries as seldom as possible: when ranks are not placed host by host
// (srun's cyclic distribution, hand-written rank files), all-reduce runs over ring positions
// grouped by host instead of ranks (algo::Context::rank_at).
void Communicator::use_ring_order(const std::vector<std::string>& host_of_rank) {
  std::vector<int> order = topo::ring_order_by_host(host_of_rank);
  ring_order_.clear();
  ring_position_ = rank_;
  bool identity = true;
  for (size_t v = 0; v < order.size(); ++v) identity = identity && order[v] == static_cast<int>(v);
  if (identity || order.size() != static_cast<size_t>(size_)) return;
  ring_order_ = std::move(order);
  for (int v = 0; v < size_; ++v) {
    if (ring_order_[static_cast<size_t>(v)] == rank_) ring_position_ = v;
  }
  COLLX_INFO(INIT, "communicator '%s': ranks are not grouped by host; all-reduce rings run in host order "
             "(this rank at position %d)", name_.c_str(), ring_position_);
}

// COLLX_SOCKET_IFNAME unset, ranks on several hosts: among the interfaces on the subnet of
// `route_ip` (the local address that routes to the store), the one nearest this rank
// (nic_choice.h), as an exact COLLX_SOCKET_IFNAME spec. "" (use the route's interface) when
// there is no choice to make or the topology cannot be read.
std::string Communicator::nearest_interface(const std::string& route_ip) const {
  const std::vector<std::string> reachable = interfaces_on_subnet_of(route_ip);
  if (reachable.size() < 2) return "";
  topo::Topology machine;
  if (!topo::load_this_machine(&machine).ok()) return "";
  const std::string nic = nearest_reachable_nic(machine, reachable, local_rank_, local_size_);
  if (nic.empty()) return "";
  COLLX_INFO(INIT, "communicator '%s': using %s, the interface nearest local rank %d among %zu on the store's "
             "subnet (set COLLX_SOCKET_IFNAME to override)", name_.c_str(), nic.c_str(), local_rank_,
             reachable.size());
  return "=" + nic;
}

}  // namespace collx
