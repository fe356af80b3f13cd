// Argument checks of the v-collectives, whose layouts are arrays per rank: every block
// inside size_t and 1 TiB, no two blocks a rank receives overlapping (it would receive two
// blocks into one place), this rank's own block the same size on both sides, buffers present
// where blocks need them, and the in-place rules. Like validate(), nothing is sent when one
// fails.
#include <algorithm>
#include <cstdint>

#include "lib/core/comm.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

Status invalid_v(int coll, const std::string& detail) {
  return make_status(COLLX_ERR_INVALID_ARG, "%s: %s", coll_name(coll), detail.c_str());
}

// One buffer of a v-collective and the layout of its blocks.
struct Side {
  const char* buf_name;     // "recvbuf"
  const void* buf;
  const char* counts_name;  // "recvcounts"
  const char* displs_name;  // "displs"
  const std::vector<size_t>* counts;
  const std::vector<size_t>* displs;
  bool disjoint;  // blocks must not overlap (the side that is written)
};

// Checks the arrays of `side` and sets *extent to the elements they span.
Status check_side(int coll, const Side& side, size_t n, size_t element, size_t* extent) {
  const std::vector<size_t>& counts = *side.counts;
  const std::vector<size_t>& displs = *side.displs;
  if (counts.size() != n || displs.size() != n) {
    return invalid_v(coll, string_printf("%s and %s need %zu entries (one per rank)", side.counts_name,
                                         side.displs_name, n));
  }
  // Blocks as [begin, end) in elements, checked for overflow, then for overlap in order.
  std::vector<std::pair<size_t, size_t>> blocks;
  *extent = 0;
  for (size_t r = 0; r < n; ++r) {
    if (displs[r] > SIZE_MAX - counts[r]) {
      return invalid_v(coll, string_printf("%s[%zu] + %s[%zu] overflows size_t", side.displs_name, r,
                                           side.counts_name, r));
    }
    const size_t end = displs[r] + counts[r];
    if (end > (size_t{1} << 40) / element) {
      return invalid_v(coll, string_printf("block %zu ends past 1 TiB of %s (%s[%zu] %zu + %s[%zu] %zu)", r,
                                           side.buf_name, side.displs_name, r, displs[r], side.counts_name, r,
                                           counts[r]));
    }
    *extent = std::max(*extent, end);
    if (counts[r] > 0) blocks.emplace_back(displs[r], end);
  }
  if (*extent > 0 && side.buf == nullptr) {
    return invalid_v(coll, string_printf("%s is NULL but its blocks cover %zu elements", side.buf_name, *extent));
  }
  if (!side.disjoint) return Status::Ok();
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].first < blocks[i - 1].second) {
      return invalid_v(coll, string_printf("blocks overlap in %s: elements [%zu, %zu) and [%zu, %zu); %s must give "
                                           "each rank its own place",
                                           side.buf_name, blocks[i - 1].first, blocks[i - 1].second, blocks[i].first,
                                           blocks[i].second, side.displs_name));
    }
  }
  return Status::Ok();
}

bool bytes_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto at = reinterpret_cast<uintptr_t>(a), bt = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && at < bt + b_bytes && bt < at + a_bytes;
}

// A layout buffer (`whole`, every rank's block) and this rank's one block (`own`, `count`
// elements, named own_buf_name / count_name): the own block's size equals the layout's entry
// `me`, buffers are present, and they either do not overlap or the own buffer is exactly
// block `me` of the whole (in place).
Status check_rooted(int coll, const Side& whole, const void* own, const char* own_buf_name, size_t count,
                    const char* count_name, size_t me, size_t n, size_t element) {
  size_t extent = 0;
  COLLX_RETURN_IF_ERROR(check_side(coll, whole, n, element, &extent));
  const size_t expected = (*whole.counts)[me];
  if (count != expected) {
    return invalid_v(coll, string_printf("%s %zu differs from %s[%zu] = %zu", count_name, count, whole.counts_name,
                                         me, expected));
  }
  if (count > 0 && own == nullptr) {
    return invalid_v(coll, string_printf("%s is NULL but %s is %zu", own_buf_name, count_name, count));
  }
  const auto* base = static_cast<const char*>(whole.buf);
  const size_t own_at = (*whole.displs)[me];
  if (count == 0 || own == base + own_at * element) return Status::Ok();
  if (bytes_overlap(own, count * element, base, extent * element)) {
    return invalid_v(coll, string_printf("%s overlaps %s; in place needs %s == %s + %s[%zu] elements (= %zu)",
                                         own_buf_name, whole.buf_name, own_buf_name, whole.buf_name,
                                         whole.displs_name, me, own_at));
  }
  return Status::Ok();
}

}  // namespace

Status Communicator::validate_v(const CollCall& c) const {
  const size_t n = static_cast<size_t>(size_);
  const size_t element = datatype_size(c.datatype);
  const size_t me = static_cast<size_t>(rank_);
  const bool root = c.root == rank_;
  switch (c.coll) {
    case COLLX_COLL_ALLGATHERV:
      return check_rooted(c.coll, {"recvbuf", c.recvbuf, "recvcounts", "displs", &c.counts, &c.displs, true},
                          c.sendbuf, "sendbuf", c.count, "sendcount", me, n, element);
    case COLLX_COLL_REDUCE_SCATTERV:  // displs: packed by the API
      return check_rooted(c.coll, {"sendbuf", c.sendbuf, "recvcounts", "packed offsets", &c.counts, &c.displs, true},
                          c.recvbuf, "recvbuf", c.count, "recvcounts[rank]", me, n, element);
    case COLLX_COLL_GATHERV:
      if (!root) break;
      return check_rooted(c.coll, {"recvbuf", c.recvbuf, "recvcounts", "displs", &c.counts, &c.displs, true},
                          c.sendbuf, "sendbuf", c.count, "sendcount", me, n, element);
    case COLLX_COLL_SCATTERV:
      if (!root) break;
      return check_rooted(c.coll, {"sendbuf", c.sendbuf, "sendcounts", "displs", &c.counts, &c.displs, true},
                          c.recvbuf, "recvbuf", c.count, "recvcount", me, n, element);
    case COLLX_COLL_ALLTOALLV: {
      // Send blocks may overlap (they are only read); received ones may not.
      size_t send_extent = 0, recv_extent = 0;
      COLLX_RETURN_IF_ERROR(check_side(
          c.coll, {"sendbuf", c.sendbuf, "sendcounts", "sdispls", &c.send_counts, &c.send_displs, false}, n, element,
          &send_extent));
      COLLX_RETURN_IF_ERROR(check_side(c.coll, {"recvbuf", c.recvbuf, "recvcounts", "rdispls", &c.counts, &c.displs, true},
                                       n, element, &recv_extent));
      if (c.send_counts[me] != c.counts[me]) {
        return invalid_v(c.coll, string_printf("sendcounts[%zu] = %zu differs from recvcounts[%zu] = %zu (the block "
                                               "this rank sends itself)",
                                               me, c.send_counts[me], me, c.counts[me]));
      }
      if (bytes_overlap(c.sendbuf, send_extent * element, c.recvbuf, recv_extent * element)) {
        return invalid_v(c.coll, "sendbuf's blocks overlap recvbuf's; alltoallv has no in-place form");
      }
      return Status::Ok();
    }
    default:
      break;
  }
  // Gatherv and scatterv away from the root: one buffer of count elements.
  const bool sends = c.coll == COLLX_COLL_GATHERV;
  if (c.count > 0 && (sends ? c.sendbuf : c.recvbuf) == nullptr) {
    return invalid_v(c.coll, string_printf("%s is NULL but %s is %zu", sends ? "sendbuf" : "recvbuf",
                                           sends ? "sendcount" : "recvcount", c.count));
  }
  return Status::Ok();
}

}  // namespace collx
