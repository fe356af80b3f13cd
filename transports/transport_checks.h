// Checks every transport makes the same way, so their errors read the same: arguments of a
// post, how a request records what was posted, and the two mismatch checks (a message whose
// size or OpDesc differs from its receive, and a message that contradicts the collective
// running now). Header-only: transports are separate layers with no common library.
#pragma once

#include <algorithm>
#include <cinttypes>
#include <deque>
#include <string>
#include <unordered_map>

#include "transports/transport.h"

namespace collx {
namespace transport {

// Largest message any transport accepts.
constexpr uint64_t kMaxMessageBytes = 1ull << 40;

inline Status check_post_args(const Request* req, int peer, int size, const void* buf, size_t bytes) {
  if (req == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "request is null");
  if (!req->done()) return make_status(COLLX_ERR_INVALID_USAGE, "request is still pending");
  if (peer < 0 || peer >= size) {
    return make_status(COLLX_ERR_INVALID_ARG, "peer %d out of range (communicator of %d ranks)", peer, size);
  }
  if (buf == nullptr && bytes > 0) return make_status(COLLX_ERR_INVALID_ARG, "null buffer for %zu bytes", bytes);
  if (bytes > kMaxMessageBytes) return make_status(COLLX_ERR_INVALID_ARG, "message of %zu bytes exceeds 1 TiB", bytes);
  return Status::Ok();
}

inline void fill_posted_request(Request* req, bool is_send, int peer, uint64_t tag, const void* buf, size_t bytes,
                                const OpDesc& desc) {
  req->reset_for_post();
  req->peer = peer;
  req->tag = tag;
  req->is_send = is_send;
  req->buffer = const_cast<void*>(buf);
  req->bytes = bytes;
  req->desc = desc;
}

// "collective #12 step 3" or "tag 5".
inline std::string tag_text(uint64_t tag) {
  if (is_coll_tag(tag)) {
    return string_printf("collective #%" PRIu64 " step %" PRIu64, coll_tag_seq(tag), tag & (kCollMaxSteps - 1));
  }
  return string_printf("tag %" PRIu64, tag);
}

// The core's rendering when it gave one, else the raw fields.
inline std::string describe_desc(const DescribeFn& describe, const OpDesc& d) {
  if (describe) return describe(d);
  return string_printf("op{kind %u, datatype %u, op %u, algorithm %u, root %d, count %" PRIu64 ", seq %" PRIu64 "}",
                       d.kind, d.datatype, d.op, d.algorithm, d.root, d.count, d.seq);
}

// A message from `peer` of `sent_bytes` described by `sent` against a receive of
// `recv_bytes` described by `recv` on `rank`: COLLX_ERR_MISMATCH naming both unless equal.
inline Status check_message_matches(const DescribeFn& describe, int rank, int peer, uint64_t tag, uint64_t sent_bytes,
                                    const OpDesc& sent, size_t recv_bytes, const OpDesc& recv) {
  if (sent_bytes == recv_bytes && sent == recv) return Status::Ok();
  return make_status(COLLX_ERR_MISMATCH,
                     "rank %d posted %s [receiving %zu bytes from rank %d] but rank %d sent %s [%" PRIu64 " bytes] (%s)",
                     rank, describe_desc(describe, recv).c_str(), recv_bytes, peer, peer,
                     describe_desc(describe, sent).c_str(), sent_bytes, tag_text(tag).c_str());
}

// A collective message that contradicts the collective `active` running on `rank` (same
// sequence number but different call, or an older sequence number): COLLX_ERR_MISMATCH.
inline Status check_against_active(const DescribeFn& describe, int rank, const OpDesc* active, int peer, uint64_t tag,
                                   const OpDesc& desc) {
  if (active == nullptr || !is_coll_tag(tag)) return Status::Ok();
  if (desc.seq == active->seq && desc != *active) {
    return make_status(COLLX_ERR_MISMATCH, "rank %d is running %s but rank %d sent %s (%s)", rank,
                       describe_desc(describe, *active).c_str(), peer, describe_desc(describe, desc).c_str(),
                       tag_text(tag).c_str());
  }
  if (desc.seq < active->seq) {
    return make_status(COLLX_ERR_MISMATCH,
                       "rank %d is running %s but rank %d sent a message of an earlier collective, %s (%s), that "
                       "no receive consumed: the ranks called different collectives",
                       rank, describe_desc(describe, *active).c_str(), peer, describe_desc(describe, desc).c_str(),
                       tag_text(tag).c_str());
  }
  return Status::Ok();
}

// Cancelling a receive that is still only posted (nothing matched it): drop it from its
// tag's queue, and the queue when it empties. The engines keep posted receives this way.
inline void forget_posted(std::unordered_map<uint64_t, std::deque<Request*>>& posted, Request* req) {
  auto queue = posted.find(req->tag);
  if (queue == posted.end()) return;
  queue->second.erase(std::remove(queue->second.begin(), queue->second.end(), req), queue->second.end());
  if (queue->second.empty()) posted.erase(queue);
}

}  // namespace transport
}  // namespace collx
