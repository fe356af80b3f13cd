// The transport table (factory.h): each row turns TransportSetup into its transport's
// parameters, read from the settings where the transport has its own.
#include "transports/factory.h"

#include "collx/collx.h"
#include "lib/common/settings.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/ucx/ucx_transport.h"

namespace collx {
namespace transport {
namespace {

// The fields every transport's parameters share.
template <class Params>
Params common_params(const TransportSetup& setup, const char* name) {
  Params params;
  params.rank = setup.rank;
  params.size = setup.size;
  params.comm_id = setup.comm_id;
  params.bootstrap = setup.bootstrap;
  params.bootstrap_name = name;
  params.describe = setup.describe;
  params.deadline = setup.deadline;
  return params;
}

bool always_built() { return true; }

Status create_shm(const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  auto params = common_params<ShmTransportParams>(setup, "shm");
  uint64_t unexpected_max = params.unexpected_max_bytes;
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::UNEXPECTED_MAX, &unexpected_max));
  params.unexpected_max_bytes = static_cast<size_t>(unexpected_max);
  return create_shm_transport(params, out);
}

// The interface TCP listens on when COLLX_SOCKET_IFNAME is unset: loopback inside one host;
// across hosts the one routing to setup.route_to_host, or the core's pick among those on
// its subnet.
Status choose_tcp_route(const TransportSetup& setup, TcpTransportParams* params) {
  if (setup.single_host) {
    params->route_to_host = "127.0.0.1";
    return Status::Ok();
  }
  if (setup.route_to_host.empty()) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       "ranks of '%s' span several hosts and the store has no network address to "
                       "pick an interface from; set COLLX_SOCKET_IFNAME (e.g. eth0)",
                       setup.comm_name.c_str());
  }
  params->route_to_host = setup.route_to_host;
  if (!setup.pick_interface) return Status::Ok();
  tcp::SocketAddress route;
  std::string why;
  // No route: "" keeps choose_local_address's own fallback in create_tcp_transport.
  if (!tcp::choose_local_address("", setup.route_to_host, &route, &why).ok()) return Status::Ok();
  params->ifname = setup.pick_interface(route.ip());
  return Status::Ok();
}

Status create_tcp(const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  auto params = common_params<TcpTransportParams>(setup, "tcp");
  COLLX_RETURN_IF_ERROR(load_tcp_settings(&params));
  // On loopback several sockets per peer cost more than they bring (measured: one socket
  // 1.3-1.5 GB/s, two 1.0-1.2 GB/s): stripe only across hosts unless asked to.
  if (setup.single_host && !setting_is_set(SettingId::TCP_NSOCKS)) params.sockets_per_peer = 1;
  if (params.ifname.empty()) COLLX_RETURN_IF_ERROR(choose_tcp_route(setup, &params));
  std::unique_ptr<TcpTransport> tcp;
  COLLX_RETURN_IF_ERROR(create_tcp_transport(params, &tcp));
  *out = std::move(tcp);
  return Status::Ok();
}

Status create_ucx(const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  return create_ucx_transport(common_params<UcxTransportParams>(setup, "ucx"), out);
}

// Order of preference (lib/core/comm_transport.cc says why): shared memory inside a host,
// then TCP, then UCX (reached only when tcp is not allowed).
constexpr TransportFactory kFactories[] = {
    {COLLX_TRANSPORT_SHM, "shm", /*single_host_only=*/true, always_built, create_shm},
    {COLLX_TRANSPORT_TCP, "tcp", /*single_host_only=*/false, always_built, create_tcp},
    {COLLX_TRANSPORT_UCX, "ucx", /*single_host_only=*/false, ucx_transport_built, create_ucx},
};

}  // namespace

const TransportFactory* transport_factories(size_t* count) {
  *count = sizeof(kFactories) / sizeof(kFactories[0]);
  return kFactories;
}

}  // namespace transport
}  // namespace collx
