// Creating a TCP transport: choose the local address, listen, exchange addresses through the
// bootstrap, connect the mesh, hand the sockets to the engine.
#include "transports/tcp/tcp_transport.h"

#include <algorithm>
#include <chrono>

#include "lib/common/auth.h"
#include "lib/common/auth_policy.h"
#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "transports/tcp/tcp_engine.h"
#include "transports/tcp/tcp_mesh.h"

namespace collx {

Status load_tcp_settings(TcpTransportParams* params) {
  int64_t nsocks = params->sockets_per_peer;
  COLLX_RETURN_IF_ERROR(setting_int(SettingId::TCP_NSOCKS, &nsocks));
  if (nsocks < 1 || nsocks > tcp::kMaxSocketsPerPeer) {
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_TCP_NSOCKS=%lld is out of range [1, %d]",
                       static_cast<long long>(nsocks), tcp::kMaxSocketsPerPeer);
  }
  uint64_t stripe_min = params->stripe_min_bytes;
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::TCP_STRIPE_MIN, &stripe_min));
  uint64_t unexpected_max = params->unexpected_max_bytes;
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::UNEXPECTED_MAX, &unexpected_max));
  uint64_t socket_buffer = params->socket_buffer_bytes;
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::TCP_SOCKBUF, &socket_buffer));
  if (socket_buffer > (1u << 30)) {
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_TCP_SOCKBUF=%llu is above 1G",
                       static_cast<unsigned long long>(socket_buffer));
  }
  params->socket_buffer_bytes = static_cast<size_t>(socket_buffer);
  params->sockets_per_peer = static_cast<int>(nsocks);
  params->stripe_min_bytes = static_cast<size_t>(stripe_min);
  params->unexpected_max_bytes = static_cast<size_t>(unexpected_max);
  params->ifname = setting_raw(SettingId::SOCKET_IFNAME);
  COLLX_RETURN_IF_ERROR(auth::job_token_from_settings(&params->job_token));
  COLLX_RETURN_IF_ERROR(socket_liveness_from_settings(&params->liveness));
  return Status::Ok();
}

static Status validate(const TcpTransportParams& p) {
  if (p.size < 1 || p.rank < 0 || p.rank >= p.size) {
    return make_status(COLLX_ERR_INVALID_ARG, "TCP transport: rank %d of %d is out of range", p.rank, p.size);
  }
  if (p.sockets_per_peer < 1 || p.sockets_per_peer > tcp::kMaxSocketsPerPeer) {
    return make_status(COLLX_ERR_INVALID_ARG, "TCP transport: %d sockets per peer is out of range [1, %d]",
                       p.sockets_per_peer, tcp::kMaxSocketsPerPeer);
  }
  if (p.size > 1 && p.bootstrap == nullptr) {
    return make_status(COLLX_ERR_INVALID_ARG, "TCP transport: no bootstrap to exchange addresses");
  }
  if (p.hello_timeout_ms <= 0) return make_status(COLLX_ERR_INVALID_ARG, "TCP transport: hello_timeout_ms must be > 0");
  COLLX_RETURN_IF_ERROR(auth::check_token_usable(p.job_token));
  return auth::check_token_required(p.job_token, "TCP transport of rank " + std::to_string(p.rank));
}

// Peers' addresses come off the network: shown in errors only sanitised and bounded.
static std::string printable(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < 64; ++i) out += (bytes[i] >= 0x20 && bytes[i] < 0x7f) ? char(bytes[i]) : '?';
  return out;
}

Status create_tcp_transport(const TcpTransportParams& params, std::unique_ptr<TcpTransport>* out) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "create_tcp_transport: out is null");
  COLLX_RETURN_IF_ERROR(validate(params));
  const auto start = std::chrono::steady_clock::now();

  tcp::SocketAddress local;
  std::string why;
  COLLX_RETURN_IF_ERROR(tcp::choose_local_address(params.ifname, params.route_to_host, &local, &why));
  UniqueFd listener;
  tcp::SocketAddress bound;
  // Every higher rank connects all its sockets at once: the backlog must hold them.
  int backlog = std::max(128, params.size * params.sockets_per_peer + 16);
  COLLX_RETURN_IF_ERROR(tcp::listen_on(local, backlog, &listener, &bound, params.socket_buffer_bytes));
  auth::warn_if_exposed(bound.sa(), bound.to_string(), params.job_token, "the TCP transport");
  // Accepted sockets inherit keepalive and user timeout from the listener; connecting ones
  // get them in build_mesh.
  Status liveness = apply_socket_liveness(listener.get(), params.liveness);
  if (!liveness.ok()) return liveness.with_context("TCP transport listener: ");
  COLLX_INFO(NET, "rank %d: TCP transport listening on %s (%s); %d sockets per peer, striping from %zu bytes, "
                  "unexpected budget %zu bytes",
             params.rank, bound.to_string().c_str(), why.c_str(), params.sockets_per_peer, params.stripe_min_bytes,
             params.unexpected_max_bytes);

  std::vector<tcp::SocketAddress> addresses(static_cast<size_t>(params.size));
  addresses[params.rank] = bound;
  if (params.size > 1) {
    const std::string mine = bound.to_string();
    std::vector<std::vector<uint8_t>> all;
    Status status = params.bootstrap->allgather(params.bootstrap_name, std::vector<uint8_t>(mine.begin(), mine.end()),
                                                &all, params.deadline);
    if (!status.ok()) return status.with_context("TCP transport address exchange: ");
    if (all.size() != static_cast<size_t>(params.size)) {
      return make_status(COLLX_ERR_INTERNAL, "TCP transport address exchange returned %zu addresses for %d ranks",
                         all.size(), params.size);
    }
    for (int r = 0; r < params.size; ++r) {
      Status parsed = tcp::parse_address(std::string(all[r].begin(), all[r].end()), &addresses[r]);
      if (!parsed.ok()) {
        return make_status(COLLX_ERR_PROTOCOL, "rank %d published a malformed TCP address '%s'", r,
                           printable(all[r]).c_str());
      }
    }
  }

  tcp::MeshParams mesh;
  mesh.rank = params.rank;
  mesh.size = params.size;
  mesh.socket_buffer_bytes = params.socket_buffer_bytes;
  mesh.comm_id = params.comm_id;
  mesh.sockets_per_peer = params.sockets_per_peer;
  mesh.deadline = params.deadline;
  mesh.hello_timeout_ms = params.hello_timeout_ms;
  mesh.job_token = params.job_token;
  mesh.liveness = params.liveness;
  tcp::MeshSockets sockets;
  COLLX_RETURN_IF_ERROR(tcp::build_mesh(mesh, listener.get(), addresses, &sockets));

  auto engine = std::make_unique<tcp::TcpEngine>(params, std::move(listener), bound, addresses, std::move(sockets));
  COLLX_RETURN_IF_ERROR(engine->init());
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  COLLX_INFO(NET, "rank %d: TCP mesh of %d ranks connected in %lld ms", params.rank, params.size,
             static_cast<long long>(elapsed.count()));
  *out = std::move(engine);
  return Status::Ok();
}

}  // namespace collx
