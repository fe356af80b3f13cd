#include "lib/common/host_port.h"

namespace collx {

Status parse_host_port(const std::string& text, const char* what, HostPort* out) {
  auto invalid = [&](const char* why) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s '%s': %s", what, text.c_str(), why);
  };
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalid("expected [ipv6-address]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return invalid("expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) return invalid("an IPv6 address needs brackets: [address]:port");
  }
  if (host.empty()) return invalid("empty host");
  // At most five digits before converting, so the number cannot overflow an int.
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return invalid("the port must be a number from 0 to 65535");
  const int number = std::stoi(port);
  if (number > 65535) return invalid("the port must be a number from 0 to 65535");
  out->host = host;
  out->port = number;
  return Status::Ok();
}

std::string host_of(const std::string& text) {
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    return close == std::string::npos ? std::string() : text.substr(1, close - 1);
  }
  // One colon separates a port; more than one is a bare IPv6 address.
  const size_t colon = text.find(':');
  if (colon != std::string::npos && text.find(':', colon + 1) == std::string::npos) return text.substr(0, colon);
  return text;
}

std::string format_host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace collx
