// The COLLX_ERR_TIMEOUT status every transport returns from wait_all: which requests are still
// pending, so the user learns which peer is late. The engine only says what it knows about
// each request (how far it got); the shape of the message is the same for every transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "transports/transport.h"

namespace collx {
namespace transport {

// What an engine knows about one pending request ("12 received", "queued", ...): goes in the
// parentheses after the byte count.
using PendingDetailFn = std::function<std::string(const Request&)>;

// "rank R: timed out after N ms; still waiting for: send to rank P (B bytes, <detail>), recv
// from ...": at most kMaxPendingListed requests listed, then "and N more". Null and done
// requests are skipped.
constexpr int kMaxPendingListed = 8;
Status pending_timeout_status(int rank, int64_t waited_ms, Request* const* reqs, size_t count,
                              const PendingDetailFn& detail);

}  // namespace transport
}  // namespace collx
