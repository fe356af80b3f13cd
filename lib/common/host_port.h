// The one parser of "host:port" addresses (the store address, the TCP transport's socket
// addresses, the launcher's rendezvous endpoint) and its inverse, so that every place accepts
// and rejects the same spellings.
#pragma once

#include <string>

#include "lib/common/status.h"

namespace collx {

struct HostPort {
  std::string host;  // a name or a numeric address, without brackets
  int port = 0;      // 0..65535
};

// "host:port" or "[ipv6-address]:port" -> *out. COLLX_ERR_INVALID_ARG, with a message
// "<what> '<text>': <why>", when the port is missing or not a number from 0 to 65535, the
// host is empty, or an IPv6 address lacks its brackets; *out is untouched then. The host is
// not resolved or checked further (callers that need a numeric address check that).
Status parse_host_port(const std::string& text, const char* what, HostPort* out);

// The host part of text for a routing hint: "host:port" -> "host", "[v6]:port" -> "v6", and a
// bare host or bare IPv6 address kept whole. Never fails; a malformed text comes back as is
// (or empty for an unclosed bracket), for the caller's own lookup to reject.
std::string host_of(const std::string& text);

// The inverse of parse_host_port: brackets around an IPv6 address.
std::string format_host_port(const std::string& host, int port);

}  // namespace collx
