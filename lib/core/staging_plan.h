// Whole-buffer staging of a collective on CUDA device buffers through pinned host memory:
// where each buffer sits in the staging, which device bytes are copied in before the host
// algorithm (what this rank sends) and which are copied back after it (what it receives).
// Used by the v-collectives' staged route and by the stream-ordered nonblocking route
// (comm_device_async.cc). A pure computation over the call (no device work), tested on the
// host.
#pragma once

#include <cstddef>
#include <vector>

#include "lib/common/status.h"
#include "lib/core/comm.h"

namespace collx {

struct StagingPlan {
  // `bytes` at `device` mirrored at byte `host` of the staging.
  struct Copy {
    char* device;
    size_t host;
    size_t bytes;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t bytes = 0;        // staging needed
  size_t send_at = kNone;  // staging offset standing for sendbuf (kNone: sendbuf is NULL)
  size_t recv_at = kNone;  // likewise for recvbuf
  std::vector<Copy> in;    // device -> staging before the algorithm: the input this rank sends
  // staging -> device after it: only the blocks this rank receives, so device bytes between
  // blocks (v-collective displacements with gaps) are left as they were.
  std::vector<Copy> out;
};

// The plan of `call` (validated; any collective but the barrier) on `rank` of `size` ranks.
// In-place calls (one buffer inside the other) share one staging region, so the algorithm
// sees the same in-place layout on the host.
Status plan_staging(const CollCall& call, int rank, int size, StagingPlan* plan);

}  // namespace collx
