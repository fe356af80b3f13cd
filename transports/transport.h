// The transport interface: what algorithms see of the network. A transport moves tagged
// messages between the ranks of one communicator: post a send, post a receive (matched by
// peer and tag, in the order posted), wait with a deadline, cancel, poison, abort.
//
// Every message carries the OpDesc of the call that sent it, so a receiver detects ranks
// that called different operations (or counts, types, ops, roots, algorithms) before a byte
// of the message reaches a user buffer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {
namespace transport {

// What a message belongs to. Compared field by field between sender and receiver.
struct OpDesc {
  uint8_t kind = 0;       // collx_coll_t
  uint8_t datatype = 0;   // collx_datatype_t
  uint8_t op = 0;         // collx_op_t as called by the user
  uint8_t algorithm = 0;  // collx_algorithm_t chosen (so differing COLLX_ALGO is caught)
  int32_t root = -1;      // -1 when the collective has no root
  uint64_t count = 0;     // the count argument of the call
  uint64_t seq = 0;       // collective sequence number on the communicator (0 for p2p)

  bool operator==(const OpDesc& o) const {
    return kind == o.kind && datatype == o.datatype && op == o.op && algorithm == o.algorithm &&
           root == o.root && count == o.count && seq == o.seq;
  }
  bool operator!=(const OpDesc& o) const { return !(*this == o); }
};

// Renders an OpDesc for error messages ("allreduce #12 (count 1000, float32, sum, ring)").
// Supplied by the core, which knows the names.
using DescribeFn = std::function<std::string(const OpDesc&)>;

// Tags. Collective messages use tags with the top bit set: the sequence number of the
// collective and a step index inside it. Point-to-point messages use the user's tag (>= 0).
constexpr uint64_t kCollTagBit = 1ull << 63;
constexpr int kCollStepBits = 24;
constexpr uint64_t kCollMaxSteps = 1ull << kCollStepBits;
inline uint64_t coll_tag(uint64_t seq, uint64_t step) {
  return kCollTagBit | (seq << kCollStepBits) | (step & (kCollMaxSteps - 1));
}
inline bool is_coll_tag(uint64_t tag) { return (tag & kCollTagBit) != 0; }
inline uint64_t coll_tag_seq(uint64_t tag) { return (tag & ~kCollTagBit) >> kCollStepBits; }

// A posted send or receive. The poster owns the object and keeps it (and its buffer) alive
// until done() or until Transport::cancel returned for it.
class Request {
 public:
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  bool done() const { return state_.load(std::memory_order_acquire) != kPending; }
  bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }
  // Valid once done().
  const Status& status() const { return status_; }

  // What was posted (set by the transport in post_*).
  int peer = -1;
  uint64_t tag = 0;
  bool is_send = false;
  void* buffer = nullptr;
  size_t bytes = 0;
  OpDesc desc;

  // For transports: complete the request. Call once.
  void complete_ok() { state_.store(kDone, std::memory_order_release); }
  void complete_error(Status status) {
    status_ = std::move(status);
    state_.store(kFailed, std::memory_order_release);
  }
  // For transports: reset before reuse by post_*.
  void reset_for_post() {
    state_.store(kPending, std::memory_order_relaxed);
    status_ = Status::Ok();
    transport_private = nullptr;
  }

  void* transport_private = nullptr;  // owned by the transport that posted the request

 private:
  enum : int { kPending = 0, kDone = 1, kFailed = 2 };
  std::atomic<int> state_{kDone};
  Status status_;
};

// How a transport exchanges its addresses with the other ranks at creation: an all-gather
// of one blob per rank under a name unique within the communicator. Implemented by the core
// over the bootstrap store.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual Status allgather(const std::string& name, const std::vector<uint8_t>& mine,
                           std::vector<std::vector<uint8_t>>* all, Deadline deadline) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Start sending `bytes` bytes of `buf` to `peer` (bytes may be 0). The send is complete
  // when the buffer may be reused. Fails at once (and leaves `req` untouched by the
  // transport) when the transport is poisoned or the arguments are invalid.
  virtual Status post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes,
                           const OpDesc& desc) = 0;
  // Start receiving exactly `bytes` bytes from `peer` with `tag` into `buf`. Receives for the
  // same (peer, tag) match messages in the order they were sent. A message whose size or
  // OpDesc differs from the receive's fails it (and poisons the transport) with
  // COLLX_ERR_MISMATCH naming both operations.
  virtual Status post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes,
                           const OpDesc& desc) = 0;

  // Block until every request is done, one fails, the transport is poisoned or aborted, or
  // the deadline passes. Returns the first failure. COLLX_ERR_TIMEOUT names the peers whose
  // requests are still pending. Several threads may wait at once.
  virtual Status wait_all(Request* const* reqs, size_t count, Deadline deadline) = 0;

  // Forget requests that are not done: the transport never touches their buffers again once
  // this returns. Cancelling a request whose bytes are partly on the wire leaves that stream
  // unusable, so the transport poisons itself in that case.
  virtual void cancel(Request* const* reqs, size_t count) = 0;

  // The collective now running (nullptr when none). A message of that sequence number whose
  // OpDesc differs, or of an older sequence number, poisons the transport with
  // COLLX_ERR_MISMATCH at once, even before the matching receive is posted.
  virtual void set_active_op(const OpDesc* desc) = 0;

  // Fail every pending and future request with `status`. With notify_peers, tell every peer
  // (best effort, non-blocking) so they fail too, naming this rank.
  virtual void poison(const Status& status, bool notify_peers) = 0;
  // OK while healthy, else the status that poisoned the transport.
  virtual Status health() const = 0;

  // Any thread, never blocks: wake every waiter with COLLX_ERR_ABORTED and cut the
  // connections so peers see this rank fail.
  virtual void abort() = 0;

  // Orderly close: tell peers this rank leaves (so they report "rank R left" rather than
  // "rank R died"), flush within the deadline, close. After close only the destructor.
  virtual void close(Deadline deadline) = 0;
};

}  // namespace transport
}  // namespace collx
