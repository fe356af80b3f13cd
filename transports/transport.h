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

// Memory every rank of one host can read in place, with counters to meet on (the shm
// transport only). Each rank owns a board of two halves, used in alternation by successive
// rounds so a rank may fill one half while slower peers still read the other; only its owner
// writes a board, peers read it. Algorithms that read their peers' data directly
// (algorithms/shared_memory.cc) are built on it.
//
// Ordering: publish() is a release; a peer whose wait for that value completed sees every
// write its publisher made to its board before publishing. Thread safety: one collective at a
// time uses the boards (the core runs collectives in order); post_wait like post_recv.
class SharedBoards {
 public:
  enum Counter : int { kArrived = 0, kReduced = 1, kDone = 2, kNumCounters = 3 };
  // Bytes of one half of a board.
  virtual size_t half_bytes() const = 0;
  // Half `parity` (0 or 1) of `rank`'s board as mapped in this process.
  virtual uint8_t* board(int rank, int parity) = 0;
  // Sets this rank's `counter` to `value` (values only grow) and records `desc` as the
  // operation it belongs to; wakes peers that sleep in a wait.
  virtual void publish(Counter counter, uint64_t value, const OpDesc& desc) = 0;
  // True when `peer`'s `counter` is at least `value` now and, with `desc`, the peer published
  // that value for `desc` (no lock, no waiting). False says nothing about a mismatch: post a
  // wait to learn why.
  virtual bool reached(int peer, Counter counter, uint64_t value, const OpDesc* desc) const = 0;
  // A request completing when `peer`'s `counter` reaches `value`; waited for with
  // Transport::wait_all (deadlines, dead peers, poison and abort apply) and cancelled with
  // Transport::cancel. With `desc`, a peer that published that value for a different
  // operation fails it and poisons the transport with COLLX_ERR_MISMATCH.
  virtual Status post_wait(Request* req, int peer, Counter counter, uint64_t value, const OpDesc* desc) = 0;
  // Whether every rank may copy straight out of every peer's memory (cross-memory attach);
  // the same answer on every rank (agreed when the transport was created).
  virtual bool can_read_peers() const = 0;
  // Copies `bytes` at address `remote` of `peer`'s process into `local`: peers' user buffers
  // read in place, one copy. Only where can_read_peers(); the peer must keep the memory
  // unchanged until it learns the read is over (a counter this rank publishes afterwards).
  virtual Status read_peer(int peer, uint64_t remote, void* local, size_t bytes) = 0;
  // Zero-copy buffers (collx_mem_alloc). Where `bytes` at `p` (a buffer of this process) lie,
  // for peers that may map them: region_id 0 when it is ordinary memory.
  struct BufferNote {
    uint64_t address = 0;
    uint64_t region_id = 0, region_base = 0, region_bytes = 0;
    int64_t region_fd = -1;
  };
  virtual BufferNote describe_buffer(const void* p, size_t bytes) const = 0;
  // `bytes` at `peer`'s address `remote`, inside the buffer `note` (which that peer described),
  // mapped read-only in this process: reads and reductions take the data straight from it.
  // nullptr when the peer's buffer is not shared memory or cannot be mapped here: read it with
  // read_peer. Like read_peer, only for memory the peer keeps unchanged until it learns the
  // read is over. Mappings are cached (a few per peer).
  virtual const uint8_t* map_peer(int peer, const BufferNote& note, uint64_t remote, size_t bytes) = 0;
  // Tiny payloads (at most kInlineBytes) ride in one cache line with their round: for
  // all-reduces of a few elements, where a meeting is all the cost. publish_inline writes
  // the payload, then publishes `kArrived` = round (so waits on kArrived see it too).
  static constexpr size_t kInlineBytes = 32;
  virtual void publish_inline(uint64_t round, const OpDesc& desc, const void* data, size_t bytes) = 0;
  // `rank`'s inline payload of `round` when it published it for `desc` (this rank's own too),
  // else nullptr (not yet, or for another operation: post a wait on kArrived to learn which).
  // Valid until this rank publishes kArrived for round + 1.
  virtual const uint8_t* inline_payload(int rank, uint64_t round, const OpDesc& desc) const = 0;
  // Rounds are numbered from 1 on each rank, in the same order on every rank (collectives
  // run in the same order); returns the next one.
  uint64_t next_round() { return ++round_; }

 protected:
  ~SharedBoards() = default;

 private:
  uint64_t round_ = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Shared boards of ranks on one host; nullptr when the transport has none.
  virtual SharedBoards* shared_boards() { return nullptr; }

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
