#include "lib/common/socket_liveness.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

#include "lib/common/settings.h"

namespace collx {

namespace {

// Linux caps TCP_KEEPIDLE and TCP_KEEPINTVL at 32767 s and TCP_KEEPCNT at 127.
constexpr int64_t kMaxKeepaliveSeconds = 32767;
constexpr int64_t kMaxKeepaliveCount = 127;
constexpr int64_t kMaxUserTimeoutMs = INT32_MAX;

Status read_bounded(SettingId id, int64_t low, int64_t high, int* out) {
  int64_t value = 0;
  COLLX_RETURN_IF_ERROR(setting_int(id, &value));
  if (value < low || value > high) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s=%lld is out of range [%lld, %lld]", setting_info(id).name,
                       static_cast<long long>(value), static_cast<long long>(low), static_cast<long long>(high));
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status set_int_option(int fd, int level, int option, int value, const char* name) {
  if (::setsockopt(fd, level, option, &value, sizeof value) != 0) {
    return system_error(string_printf("setsockopt(%s=%d)", name, value).c_str(), errno);
  }
  return Status::Ok();
}

}  // namespace

int64_t SocketLiveness::silent_peer_report_ms() const {
  if (keepalive_idle_s <= 0 || (user_timeout_ms <= 0 && unacked_timeout_ms <= 0)) return -1;
  const int64_t idle_ms = keepalive_idle_s * 1000LL;
  const int64_t interval_ms = keepalive_interval_s * 1000LL;
  // Without TCP_USER_TIMEOUT, keepalive drops an idle connection after its count of
  // unanswered probes. With it, Linux drops the connection at the first keepalive probe
  // (there is always at least one) once the peer has been silent for the user timeout.
  int64_t probes = keepalive_count;
  if (user_timeout_ms > 0) {
    probes = 1;
    if (user_timeout_ms > idle_ms + interval_ms) probes = (user_timeout_ms - idle_ms + interval_ms - 1) / interval_ms;
  }
  const int64_t idle_connection_ms = idle_ms + probes * interval_ms;
  int64_t in_flight_ms = INT64_MAX;
  if (unacked_timeout_ms > 0) in_flight_ms = unacked_timeout_ms + static_cast<int64_t>(kUnackedCheckPeriodMs);
  if (user_timeout_ms > 0) in_flight_ms = std::min<int64_t>(in_flight_ms, user_timeout_ms);
  return std::max<int64_t>(idle_connection_ms, in_flight_ms);
}

SocketLiveness SocketLiveness::for_store() const {
  SocketLiveness store = *this;
  if (store.user_timeout_ms == 0) store.user_timeout_ms = unacked_timeout_ms;
  store.unacked_timeout_ms = 0;
  return store;
}

Status socket_liveness_from_settings(SocketLiveness* out) {
  SocketLiveness liveness;
  COLLX_RETURN_IF_ERROR(read_bounded(SettingId::TCP_KEEPALIVE_IDLE_S, 0, kMaxKeepaliveSeconds, &liveness.keepalive_idle_s));
  COLLX_RETURN_IF_ERROR(
      read_bounded(SettingId::TCP_KEEPALIVE_INTERVAL_S, 1, kMaxKeepaliveSeconds, &liveness.keepalive_interval_s));
  COLLX_RETURN_IF_ERROR(read_bounded(SettingId::TCP_KEEPALIVE_COUNT, 1, kMaxKeepaliveCount, &liveness.keepalive_count));
  COLLX_RETURN_IF_ERROR(read_bounded(SettingId::TCP_USER_TIMEOUT_MS, 0, kMaxUserTimeoutMs, &liveness.user_timeout_ms));
  COLLX_RETURN_IF_ERROR(
      read_bounded(SettingId::TCP_UNACKED_TIMEOUT_MS, 0, kMaxUserTimeoutMs, &liveness.unacked_timeout_ms));
  *out = liveness;
  return Status::Ok();
}

Status apply_socket_liveness(int fd, const SocketLiveness& liveness) {
  if (liveness.keepalive_idle_s > 0) {
    COLLX_RETURN_IF_ERROR(set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
    COLLX_RETURN_IF_ERROR(set_int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, liveness.keepalive_idle_s, "TCP_KEEPIDLE"));
    COLLX_RETURN_IF_ERROR(
        set_int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, liveness.keepalive_interval_s, "TCP_KEEPINTVL"));
    COLLX_RETURN_IF_ERROR(set_int_option(fd, IPPROTO_TCP, TCP_KEEPCNT, liveness.keepalive_count, "TCP_KEEPCNT"));
  }
  if (liveness.user_timeout_ms > 0) {
    COLLX_RETURN_IF_ERROR(
        set_int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, liveness.user_timeout_ms, "TCP_USER_TIMEOUT"));
  }
  return Status::Ok();
}

}  // namespace collx
