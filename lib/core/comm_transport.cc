// Which transport a communicator uses, and its creation.
//
// One transport per communicator, chosen from what the ranks share and what is allowed
// (COLLX_TRANSPORTS / config->transports), first match wins:
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
#include "transports/tcp/socket_util.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/ucx/ucx_transport.h"

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

// The fields every transport's parameters share.
template <class Params>
Params common_params(int rank, int size, uint64_t comm_id, transport::Bootstrap* bootstrap, const char* name,
                     Deadline deadline) {
  Params params;
  params.rank = rank;
  params.size = size;
  params.comm_id = comm_id;
  params.bootstrap = bootstrap;
  params.bootstrap_name = name;
  params.describe = describe_op;
  params.deadline = deadline;
  return params;
}

}  // namespace

Status Communicator::create_transport(transport::Bootstrap* bootstrap, bool single_host, Deadline deadline) {
  const uint32_t allowed = settings_.transports;
  const uint64_t comm_id = fnv1a64(prefix_.data(), prefix_.size());

  if (single_host && (allowed & COLLX_TRANSPORT_SHM)) {
    auto params = common_params<ShmTransportParams>(rank_, size_, comm_id, bootstrap, "shm", deadline);
    uint64_t unexpected_max = params.unexpected_max_bytes;
    COLLX_RETURN_IF_ERROR(setting_size(SettingId::UNEXPECTED_MAX, &unexpected_max));
    params.unexpected_max_bytes = static_cast<size_t>(unexpected_max);
    COLLX_RETURN_IF_ERROR(create_shm_transport(params, &transport_));
    use_cost_model();
    COLLX_INFO(INIT, "communicator '%s': shared-memory transport (all %d ranks on this host)", name_.c_str(), size_);
    return Status::Ok();
  }

  if (!(allowed & COLLX_TRANSPORT_TCP) && (allowed & COLLX_TRANSPORT_UCX) && ucx_transport_built()) {
    const auto params = common_params<UcxTransportParams>(rank_, size_, comm_id, bootstrap, "ucx", deadline);
    COLLX_RETURN_IF_ERROR(create_ucx_transport(params, &transport_));
    use_cost_model();
    COLLX_INFO(INIT, "communicator '%s': UCX transport", name_.c_str());
    return Status::Ok();
  }
  if (!(allowed & COLLX_TRANSPORT_TCP)) {
    return make_status(COLLX_ERR_UNSUPPORTED,
                       "no usable transport: the allowed set (COLLX_TRANSPORTS or config->transports) is "
                       "'%s'; %s%s", allowed_names(allowed).c_str(),
                       single_host ? "shm, tcp or ucx is needed here"
                                   : "ranks span several hosts, which needs tcp or ucx",
                       (allowed & COLLX_TRANSPORT_UCX) && !ucx_transport_built()
                           ? " (this library was built without UCX)" : "");
  }
  auto params = common_params<TcpTransportParams>(rank_, size_, comm_id, bootstrap, "tcp", deadline);
  COLLX_RETURN_IF_ERROR(load_tcp_settings(&params));
  // On loopback several sockets per peer cost more than they bring (measured: one socket
  // 1.3-1.5 GB/s, two 1.0-1.2 GB/s): stripe only across hosts unless asked to.
  if (single_host && !setting_is_set(SettingId::TCP_NSOCKS)) params.sockets_per_peer = 1;
  if (params.ifname.empty()) {
    if (single_host) {
      params.route_to_host = "127.0.0.1";
    } else if (!job_.store_addr.empty()) {
      params.route_to_host = host_of(job_.store_addr);
      params.ifname = nearest_interface(params.route_to_host);  // "" keeps the route's
    } else {
      return make_status(COLLX_ERR_INVALID_ARG,
                         "ranks of '%s' span several hosts and the store has no network address to "
                         "pick an interface from; set COLLX_SOCKET_IFNAME (e.g. eth0)",
                         name_.c_str());
    }
  }
  std::unique_ptr<TcpTransport> tcp;
  COLLX_RETURN_IF_ERROR(create_tcp_transport(params, &tcp));
  transport_ = std::move(tcp);
  use_cost_model();
  return Status::Ok();
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
// the one that routes to the store, the one nearest this rank (nic_choice.h), as an exact
// COLLX_SOCKET_IFNAME spec. "" (use the route's interface) when there is no choice to make
// or the topology cannot be read.
std::string Communicator::nearest_interface(const std::string& route_to_host) const {
  tcp::SocketAddress route;
  std::string why;
  if (!tcp::choose_local_address("", route_to_host, &route, &why).ok()) return "";
  const std::vector<std::string> reachable = interfaces_on_subnet_of(route.ip());
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
