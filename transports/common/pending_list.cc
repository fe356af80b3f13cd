// Builds the timeout message listing pending requests (see pending_list.h).
#include "transports/common/pending_list.h"

#include "lib/common/status.h"

namespace collx {
namespace transport {

Status pending_timeout_status(int rank, int64_t waited_ms, Request* const* reqs, size_t count,
                              const PendingDetailFn& detail) {
  std::string pending;
  int listed = 0, more = 0;
  for (size_t i = 0; i < count; ++i) {
    const Request* r = reqs[i];
    if (r == nullptr || r->done()) continue;
    // A long list would drown the first (usually the interesting) peers.
    if (listed == kMaxPendingListed) {
      ++more;
      continue;
    }
    if (listed++ > 0) pending += ", ";
    pending += string_printf("%s rank %d (%zu bytes, %s)", r->is_send ? "send to" : "recv from", r->peer, r->bytes,
                             detail(*r).c_str());
  }
  if (more > 0) pending += string_printf(", and %d more", more);
  return make_status(COLLX_ERR_TIMEOUT, "rank %d: timed out after %lld ms; still waiting for: %s", rank,
                     static_cast<long long>(waited_ms), pending.c_str());
}

}  // namespace transport
}  // namespace collx
