// What collx does about connections without a job token (lib/common/auth.h): the
// COLLX_REQUIRE_TOKEN rule, and the warning when a listener without one is reachable from
// other hosts. docs/security.md explains both.
#pragma once

#include <string>

#include "lib/common/status.h"

struct sockaddr;

namespace collx {
namespace auth {

// COLLX_REQUIRE_TOKEN=1 with an empty `token`: COLLX_ERR_INVALID_USAGE naming `what` (e.g. "TCP
// store server at host:port") and how to fix it. OK otherwise; a malformed setting is its error.
Status check_token_required(const std::string& token, const std::string& what);

// Whether `address` is IPv4 loopback (127/8, also as ::ffff:127.x.y.z) or IPv6 loopback (::1):
// only processes of this host can reach it.
bool is_loopback(const sockaddr* address);

// A listener without a token on an address other hosts can reach accepts anyone who reaches
// it. Warns (once per process and `who`, e.g. "store server" or "TCP transport") naming
// `printable` (the bound address) and COLLX_JOB_TOKEN. Nothing when `token` is set or
// `address` is loopback. Thread-safe.
void warn_if_exposed(const sockaddr* address, const std::string& printable, const std::string& token,
                     const char* who);

}  // namespace auth
}  // namespace collx
