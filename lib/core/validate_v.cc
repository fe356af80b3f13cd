// Argument checks of all-gatherv, whose layout is an array per rank: every block inside
// size_t, no two blocks overlapping (a rank would receive two blocks into one place),
// this rank's block equal to what it sends, and the in-place rule. Like validate(), nothing
// is sent when one fails.
#include <algorithm>
#include <cstdint>

#include "lib/core/comm.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

Status invalid_v(const std::string& detail) {
  return make_status(COLLX_ERR_INVALID_ARG, "allgatherv: %s", detail.c_str());
}

}  // namespace

Status Communicator::validate_v(const CollCall& c) const {
  const size_t n = static_cast<size_t>(size_);
  if (c.counts.size() != n || c.displs.size() != n) {
    return invalid_v(string_printf("recvcounts and displs need %zu entries (one per rank)", n));
  }
  const size_t element = datatype_size(c.datatype);
  const size_t me = static_cast<size_t>(rank_);
  if (c.count != c.counts[me]) {
    return invalid_v(string_printf("sendcount %zu differs from recvcounts[%d] = %zu", c.count, rank_, c.counts[me]));
  }
  // Blocks as [begin, end) in elements, checked for overflow, then for overlap in order.
  std::vector<std::pair<size_t, size_t>> blocks;
  size_t extent = 0;
  for (size_t r = 0; r < n; ++r) {
    if (c.displs[r] > SIZE_MAX - c.counts[r]) {
      return invalid_v(string_printf("displs[%zu] + recvcounts[%zu] overflows size_t", r, r));
    }
    const size_t end = c.displs[r] + c.counts[r];
    if (end > (size_t{1} << 40) / element) {
      return invalid_v(string_printf("block %zu ends past 1 TiB of recvbuf (displs[%zu] %zu + recvcounts[%zu] %zu)", r,
                                     r, c.displs[r], r, c.counts[r]));
    }
    extent = std::max(extent, end);
    if (c.counts[r] > 0) blocks.emplace_back(c.displs[r], end);
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].first < blocks[i - 1].second) {
      return invalid_v(string_printf("blocks overlap in recvbuf: elements [%zu, %zu) and [%zu, %zu); displs must give "
                                     "each rank its own place",
                                     blocks[i - 1].first, blocks[i - 1].second, blocks[i].first, blocks[i].second));
    }
  }
  if (c.count > 0 && c.sendbuf == nullptr) return invalid_v(string_printf("sendbuf is NULL but sendcount is %zu", c.count));
  if (extent > 0 && c.recvbuf == nullptr) {
    return invalid_v(string_printf("recvbuf is NULL but the blocks cover %zu elements", extent));
  }
  const auto* send = static_cast<const char*>(c.sendbuf);
  const auto* recv = static_cast<const char*>(c.recvbuf);
  const size_t send_bytes = c.count * element, recv_bytes = extent * element;
  if (c.count == 0 || send == recv + c.displs[me] * element) return Status::Ok();
  const auto send_at = reinterpret_cast<uintptr_t>(send), recv_at = reinterpret_cast<uintptr_t>(recv);
  if (recv_bytes > 0 && send_at < recv_at + recv_bytes && recv_at < send_at + send_bytes) {
    return invalid_v(string_printf("sendbuf overlaps recvbuf; in place needs sendbuf == recvbuf + displs[rank] "
                                   "elements (rank %d, displs[%d] = %zu)",
                                   rank_, rank_, c.displs[me]));
  }
  return Status::Ok();
}

}  // namespace collx
