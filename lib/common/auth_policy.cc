#include "lib/common/auth_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <mutex>
#include <set>

#include "lib/common/log.h"
#include "lib/common/settings.h"

namespace collx {
namespace auth {

Status check_token_required(const std::string& token, const std::string& what) {
  if (!token.empty()) return Status::Ok();
  bool required = false;
  COLLX_RETURN_IF_ERROR(setting_bool(SettingId::REQUIRE_TOKEN, &required));
  if (!required) return Status::Ok();
  return make_status(COLLX_ERR_INVALID_USAGE,
                     "%s: COLLX_REQUIRE_TOKEN=1 but no job token is set: set COLLX_JOB_TOKEN to the same secret in "
                     "every process of the job (docs/security.md), or unset COLLX_REQUIRE_TOKEN",
                     what.c_str());
}

bool is_loopback(const sockaddr* address) {
  if (address == nullptr) return false;
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

void warn_if_exposed(const sockaddr* address, const std::string& printable, const std::string& token,
                     const char* who) {
  if (!token.empty() || is_loopback(address)) return;
  static std::mutex mutex;
  static auto* warned = new std::set<std::string>();  // never destroyed: listeners may start during exit
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned->insert(who).second) return;
  }
  COLLX_WARN(INIT,
             "%s listening on %s without a job token: any process that can reach this address can connect. Set "
             "COLLX_JOB_TOKEN to the same secret in every process of the job (COLLX_REQUIRE_TOKEN=1 makes a "
             "missing token an error); see docs/security.md. Warned once per process.",
             who, printable.c_str());
}

}  // namespace auth
}  // namespace collx
