// The message-matching engine shared by the point-to-point transports (tcp, shm): posted
// and unexpected queues per peer, the unexpected-message budget, cancel, the active-op and
// mismatch checks, poison and failing a peer's requests. A transport keeps only byte
// movement (sockets, rings, rendezvous pulls) and tells the matcher what arrived.
//
// The contract every transport using it gets:
// * Matching. A message is announced once (its first fragment, cell or header) in the
//   order its sender posted it to this rank (msg ids grow per sender); a receive is posted
//   for (peer, tag). An announcement takes the oldest posted receive of its (peer, tag); a
//   receive takes the oldest unexpected message of its (peer, tag). So messages between
//   two ranks with one tag never overtake each other (MPI's non-overtaking rule), whatever
//   the interleaving of posts and arrivals. Tags do not order against each other.
// * Mismatch. A message whose size or OpDesc differs from the receive it meets fails that
//   receive's post (or the announcement) and poisons the transport with COLLX_ERR_MISMATCH
//   naming both operations; no byte reaches the receive's buffer.
// * Active op. While a collective runs (set_active), a collective message of the same
//   sequence number but another OpDesc, or of an older sequence number, poisons at once:
//   when it is announced, or when set_active finds it already buffered or paused.
// * Budget. An unexpected message whose payload the transport must hold (eager data) is
//   staged in a malloc'd buffer counted against unexpected_max_bytes. When it would not
//   fit, the announcement is refused (kPaused): the transport stops taking that peer's
//   input (its sender stalls) and the matcher calls MatchHooks::matcher_resume when a
//   receive for that peer is posted or budget is freed. Nothing is dropped. A peer that is
//   leaving is read budget or not (ignore_budget).
// * Cancel. A receive still only posted is forgotten; one whose message is partly here is
//   detached: the rest of the payload is consumed and dropped (the stream stays in step)
//   and its buffer is never written again once cancel_recv returns.
// * Poison. The first failure wins and is kept (begin_poison); every posted receive and
//   every receive with a message in progress fails with it, and so does every later post
//   (the transport checks poison() first). fail_peer does the same for one peer (a peer
//   that left fails its requests with "rank R left the communicator"; one that died
//   poisons the transport naming it). Messages that can no longer complete are forgotten;
//   complete (or fetchable) unexpected ones stay receivable.
// * Deadlines are the transport's (transports/common/wait_driver.h); completions() counts
//   every request completed here or by the transport through complete(), which the wait
//   loop watches to wake its followers.
//
// Threads: no lock of its own. Every call is made with the transport's mutex held, and the
// hooks are called with it held (possibly from inside a matcher call: a hook must not call
// back into the matcher except through poison). The fast path (a posted receive met by an
// announcement, or the reverse) costs two hash lookups and no allocation beyond the
// transport's own message record; no extra mutex pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace transport {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// A message announced by a peer: waiting for its receive (unexpected) or being received.
// Transports derive their record from it (what their byte movement needs besides).
struct InMessage {
  virtual ~InMessage() = default;
  int peer = 0;
  uint64_t msg_id = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;
  OpDesc desc;
  Request* recv = nullptr;                        // its receive (matched, or attached while unexpected)
  std::unique_ptr<uint8_t, FreeDeleter> staging;  // unexpected payload held here: counted against the budget
  uint64_t received = 0;                          // payload bytes arrived so far
  bool complete = false;                          // every byte arrived
  bool discard = false;                           // its receive was cancelled or failed: drop the rest
  // Its payload waits elsewhere (ucx: in UCX), so it stays receivable after its sender
  // left although not complete here.
  bool fetchable = false;

  // Fills what the announcement said.
  void announced(int from, uint64_t id, uint64_t message_tag, uint64_t message_bytes, const OpDesc& message_desc) {
    peer = from;
    msg_id = id;
    tag = message_tag;
    bytes = message_bytes;
    desc = message_desc;
  }
  // Where payload byte 0 goes; nullptr: drop it.
  uint8_t* target() const {
    if (discard) return nullptr;
    if (staging) return staging.get();
    return recv != nullptr ? static_cast<uint8_t*>(recv->buffer) : nullptr;
  }
};

// What the transport does for the matcher; called with the transport's mutex held.
class MatchHooks {
 public:
  // Poison the transport (its poison_locked): begin_poison, then fail its sends and tell
  // the peers when notify_peers.
  virtual void matcher_poison(const Status& status, bool notify_peers) = 0;
  // `peer`'s input is paused on the budget and might go on now (a receive for it was posted,
  // or budget was freed): look at it again soon.
  virtual void matcher_resume(int peer) = 0;
  // A receive took an unexpected message whose payload is not all here: the transport fetches
  // it into m->recv (a rendezvous pull), or lets it arrive (staged bytes are copied when it
  // completes, see message_complete).
  virtual void matcher_took_unexpected(InMessage* m) = 0;

 protected:
  ~MatchHooks() = default;
};

class Matcher {
 public:
  Matcher(int rank, int size, size_t unexpected_max_bytes, DescribeFn describe, MatchHooks& hooks);
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // ---- state the wait loop reads (transports/common/wait_driver.h WaitState)
  const Status& poison() const { return poison_; }
  const uint64_t& completions() const { return completions_; }
  uint64_t unexpected_bytes() const { return unexpected_bytes_; }

  // Completes `r` (OK or with `status`), detaches it from the transport and counts it.
  // Inline: every send and receive of the small-message path ends here.
  void complete(Request* r, const Status& status) {
    if (status.ok()) {
      complete_ok(r);
      return;
    }
    r->transport_private = nullptr;
    r->complete_error(status);
    ++completions_;
  }
  void complete_ok(Request* r) {
    r->transport_private = nullptr;
    r->complete_ok();
    ++completions_;
  }

  // ---- receives
  // Transport::post_recv after the argument and health checks. `departed`: the peer left
  // (a receive nothing buffered can satisfy fails). Mismatch: poisons and returns why.
  Status post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes, const OpDesc& desc, bool departed);
  // Transport::post_send to this rank itself (`self`), after the argument and health checks:
  // copied into the matching receive or buffered (budget or not: nothing to push back on);
  // `send` is complete when this returns OK.
  Status send_to_self(Request* send, int self, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc);
  // Cancels a receive that is not done (see the contract) and completes it with `cancelled`.
  void cancel_recv(Request* r, const Status& cancelled);

  // ---- arrivals
  enum class Arrival {
    kMatched,     // it took the oldest posted receive of its (peer, tag): m->recv
    kUnexpected,  // no receive yet: buffered (its payload staged when `staged`)
    kPaused,      // the budget cannot hold it: leave it where it is until matcher_resume
    kFailed,      // mismatch, active-op violation or no memory: the transport is poisoned
  };
  // Message `msg_id` of `bytes` announced by `peer`: matched or buffered as a new `Msg` (the
  // transport's record, derived from InMessage; the transport fills its own fields after).
  // `staged`: its payload is held here while unexpected (eager data; not a rendezvous).
  // `ignore_budget`: the peer is leaving, so everything it sent is taken. nullptr when
  // *how is kPaused or kFailed.
  template <class Msg>
  Msg* arrive(int peer, uint64_t msg_id, uint64_t tag, uint64_t bytes, const OpDesc& desc, bool staged,
              bool ignore_budget, Arrival* how) {
    Request* recv = nullptr;
    *how = announce(peer, tag, bytes, desc, staged, ignore_budget, &recv);
    if (*how == Arrival::kPaused || *how == Arrival::kFailed) return nullptr;
    auto m = std::make_unique<Msg>();
    m->announced(peer, msg_id, tag, bytes, desc);
    Msg* raw = m.get();
    if (add(std::move(m), recv, staged) == nullptr) {
      *how = Arrival::kFailed;
      return nullptr;
    }
    return raw;
  }
  // The message `msg_id` of `peer` in progress or buffered; nullptr when none.
  InMessage* find(int peer, uint64_t msg_id) const;
  // Every byte of `m` arrived: delivered to its receive (staged bytes copied) and freed, or
  // left buffered for one. Frees a discarded message.
  void message_complete(InMessage* m);
  // Frees `m`, a message no receive will take (its receive was cancelled).
  void forget(InMessage* m);
  // Hands `m`, matched (m->recv set) but still arriving, over to the transport, which then
  // completes or fails its receive itself (ucx: the data receive UCX writes into the buffer
  // must outlive a failure until UCX lets go of it). The matcher forgets it.
  std::unique_ptr<InMessage> release(InMessage* m);
  // Whether `peer`'s input is paused on the budget.
  bool paused(int peer) const { return peers_[peer].paused; }
  // Calls matcher_resume for every paused peer (a peer began leaving: read it budget or not).
  void resume_paused();

  // ---- the collective running now, failures
  // Transport::set_active_op. `check`: the transport is usable (not closed or aborted);
  // buffered and paused messages are then checked against it (a violation poisons).
  void set_active(const OpDesc* desc, bool check);
  const OpDesc* active() const { return active_ ? &*active_ : nullptr; }
  // The first poison: keeps `status` (an OK status becomes COLLX_ERR_INTERNAL) and fails
  // every peer's receives with it; true. False when already poisoned (the first stands).
  bool begin_poison(const Status& status);
  // Fails `peer`'s posted receives and receives in progress with `status`; forgets its
  // messages that can no longer complete.
  void fail_peer(int peer, const Status& status);

  // The mismatch checks, for paths that meet a message outside announce.
  Status check_match(int peer, uint64_t tag, uint64_t sent_bytes, const OpDesc& sent, size_t recv_bytes,
                     const OpDesc& recv) const;
  Status check_active(int peer, uint64_t tag, const OpDesc& desc) const;

 private:
  struct PeerQueues {
    std::unordered_map<uint64_t, std::deque<Request*>> posted;       // by tag, in post order
    std::unordered_map<uint64_t, std::deque<InMessage*>> unexpected;  // by tag, in msg id order
    std::unordered_map<uint64_t, std::unique_ptr<InMessage>> live;    // by msg id: owns every record
    bool paused = false;                                              // an announcement waits for budget
    uint64_t paused_tag = 0;                                          // ... with this tag and desc
    OpDesc paused_desc;
    uint64_t next_self_id = 1;                                        // msg ids of sends to self
  };

  // send_to_self without the send request.
  Status buffer_self(int self, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc);
  // The matching half of arrive: the receive a message announced by `peer` takes (*recv),
  // or why it takes none.
  Arrival announce(int peer, uint64_t tag, uint64_t bytes, const OpDesc& desc, bool staged, bool ignore_budget,
                   Request** recv);
  // Records an announced message with its receive (or none), staging its payload when
  // unexpected and `staged`; nullptr when no memory (the transport is poisoned).
  InMessage* add(std::unique_ptr<InMessage> m, Request* recv, bool staged);
  // Copies staged bytes into the receive, completes it and frees `m`.
  void deliver(PeerQueues& q, InMessage* m);
  void release_staging(InMessage* m);
  void set_paused(int peer, bool paused);

  const int rank_;
  const size_t unexpected_max_bytes_;
  const DescribeFn describe_;
  MatchHooks& hooks_;
  std::vector<PeerQueues> peers_;
  std::optional<OpDesc> active_;
  Status poison_;
  uint64_t completions_ = 0;
  uint64_t unexpected_bytes_ = 0;
  int paused_count_ = 0;
};

}  // namespace transport
}  // namespace collx
