// The shared-memory transport's engine. Internal to transports/shm.
//
// Threads: every public method is thread-safe; one mutex guards all state. No progress
// thread: a thread in wait_all becomes the driver (polls the rings, pushes queued cells,
// checks the peers) and sleeps on this rank's futex word without the mutex when idle; other
// waiters sleep on a condition variable. abort() takes no lock.
//
// Files: shm_engine.cc (public API, waiting), shm_progress.cc (rings in and out, matching,
// rendezvous, peers' states and liveness, poison).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "transports/common/engine_overrides.h"
#include "transports/common/matcher.h"
#include "transports/transport_checks.h"
#include "transports/common/wait_driver.h"
#include "transports/shm/shm_liveness.h"
#include "transports/shm/shm_memory.h"
#include "transports/shm/shm_ring.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_transport.h"

namespace collx {
namespace shm {

using transport::OpDesc;
using transport::Request;

// A message announced by a peer (eager or rendezvous), matched or waiting for its receive.
// Matching, staging and delivery are the matcher's (transports/common/matcher.h).
struct InMsg : transport::InMessage {
  bool rndv = false;
  bool chunked = false;     // rendezvous whose data comes through the ring (we asked)
  int64_t src_pid = 0;
  uint64_t src_addr = 0;
};

struct SendOp {
  Request* req = nullptr;
  int peer = 0;
  uint64_t msg_id = 0;
  bool rndv = false;
  bool started = false;   // a cell of it is in the ring (eager) / its RTS went out
  uint64_t pushed = 0;    // payload bytes in the ring (eager or chunks)
};

struct Peer {
  int rank = 0;
  pid_t pid = 0;
  Segment seg;                 // the peer's segment (mapped; empty for ourselves)
  RingView in_data, in_ctrl;   // rings in our segment written by this peer
  RingView out_data, out_ctrl; // rings in its segment written by us
  PeerProcess process;
  bool same_process = false;
  bool cma_unsupported = false;
  uint64_t next_send_id = 1;
  uint64_t last_announced = 0;
  std::deque<SendOp*> sendq;                            // not yet fully in the ring
  std::deque<SendOp*> chunk_ops;                        // rendezvous streamed in chunks
  std::unordered_map<uint64_t, SendOp*> awaiting;       // rendezvous waiting for ACK
  std::deque<CellHeader> ctrl_out;                      // control cells not yet pushed
  // Matched rendezvous messages not pulled yet because their reply (ACK / SEND_CHUNKS) would
  // not fit in the peer's control ring. A receive completes only once its reply is in the
  // ring, so nothing is left for us to deliver after our caller stops calling in.
  std::deque<InMsg*> pulls_waiting;
  std::vector<Request*> board_waits;  // SharedBoards::post_wait on this peer's counters
  // Its zero-copy buffers mapped here (SharedBoards::map_peer), under ShmEngine::maps_mu_.
  std::vector<MappedRegion> maps;
  size_t next_map_victim = 0;
  bool maps_refused = false;  // the kernel refused to open its memory files: stop trying
  bool draining = false;        // it left: read all it sent, budget or not
  bool departed = false;
};

// A pending SharedBoards wait (Request::transport_private of a request tagged kBoardWaitTag).
struct BoardWait {
  transport::SharedBoards::Counter counter = transport::SharedBoards::kArrived;
  uint64_t value = 0;
  bool check_desc = false;
  OpDesc desc;
};
constexpr uint64_t kBoardWaitTag = ~0ull;  // no message uses it: collective tags stop below

class ShmEngine final : public transport::Transport,
                        public transport::SharedBoards,
                        private transport::WaitHooks,
                        private transport::MatchHooks {
 public:
  ShmEngine(const ShmTransportParams& params, std::unique_ptr<Segment> own);
  ~ShmEngine() override;
  // Maps the peers' segments (names and pids from the bootstrap).
  Status attach(const std::vector<std::string>& names, const std::vector<pid_t>& pids);
  Segment& own_segment() { return *own_; }

  const char* name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  COLLX_TRANSPORT_ENGINE_OVERRIDES;
  transport::SharedBoards* shared_boards() override { return this; }

  // ---- shm_boards.cc: transport::SharedBoards
  size_t half_bytes() const override { return kBoardHalfBytes; }
  uint8_t* board(int rank, int parity) override;
  void publish(Counter counter, uint64_t value, const OpDesc& desc) override;
  bool reached(int peer, Counter counter, uint64_t value, const OpDesc* desc) const override;
  Status post_wait(Request* req, int peer, Counter counter, uint64_t value, const OpDesc* desc) override;
  bool can_read_peers() const override { return peer_reads_; }
  Status read_peer(int peer, uint64_t remote, void* local, size_t bytes) override;
  BufferNote describe_buffer(const void* p, size_t bytes) const override;
  void publish_inline(uint64_t round, const OpDesc& desc, const void* data, size_t bytes) override;
  const uint8_t* inline_payload(int rank, uint64_t round, const OpDesc& desc) const override;
  const uint8_t* map_peer(int peer, const BufferNote& note, uint64_t remote, size_t bytes) override;
  // Reads 8 bytes of every peer's segment header in the peer's process: true when
  // cross-memory attach works towards every peer (create_shm_transport agrees on it).
  bool probe_peer_reads();
  void set_peer_reads(bool all_ranks_can) { peer_reads_ = all_ranks_can; }

 private:
  // ---- shm_boards.cc
  bool poll_board_waits(Peer& p);      // completes the waits whose counter got there
  void forget_board_wait(Peer& p, Request* req);
  // A BoardWait for post_wait, from the spares when there is one (waits of a collective
  // that found a peer behind come and go every call: no allocation once warm); and back.
  // Both under mu_.
  BoardWait* take_board_wait();
  void recycle_board_wait(BoardWait* wait) noexcept;
  BoardHeader* board_header_of(int rank) const;
  // Looks at every peer's state now: the status that poisoned us (a peer failed, died or
  // aborted), or that `peer` left; OK when all is well. Takes the mutex.
  Status peer_news(int peer);
  void publish_active_op(const OpDesc& desc);
  // The collective `p` runs or ran last; false when none, or while it is being rewritten.
  bool peer_active_op(const Peer& p, OpDesc* out) const;
  // A peer running another collective at our sequence number: poisons with a mismatch.
  void check_peer_active_op(Peer& p);

  // ---- shm_engine.cc
  Status usable_locked() { return waiter_.usable(); }  // under mu_
  Status check_args(const Request* req, int peer, const void* buf, size_t bytes) const {
    return transport::check_post_args(req, peer, size_, buf, bytes);
  }
  Status aborted_status() const { return waiter_.aborted_status(); }
  COLLX_WAIT_HOOKS_OVERRIDES;  // for waiter_
  // transport::MatchHooks, for matcher_ (shm_progress.cc).
  void matcher_poison(const Status& status, bool notify_peers) override;
  void matcher_resume(int peer) override;
  void matcher_took_unexpected(transport::InMessage* m) override;
  void idle_wait(std::unique_lock<std::mutex>& lock, Deadline deadline);
  void notify_waiters();

  // ---- shm_progress.cc
  bool progress();                          // one round over every peer; true if anything moved
  bool push_sends(Peer& p);
  bool poll_ctrl(Peer& p);
  bool poll_data(Peer& p);
  bool handle_announce(Peer& p, const CellHeader& h, const uint8_t* payload);
  void start_pull(Peer& p, InMsg* m);
  void pull_now(Peer& p, InMsg* m);
  bool retry_pulls(Peer& p);
  bool reply_fits(Peer& p);
  void push_reply(Peer& p, CellType type, const InMsg& m);
  void complete_send(Peer& p, SendOp* op);
  void check_peers(bool check_processes);
  void peer_departed(Peer& p);
  void fail_peer_requests(Peer& p, const Status& status);
  void protocol_error(Peer& p, const std::string& why);
  void poison_locked(const Status& status, bool notify_peers);
  void publish_state(RankState state, const Status& reason);
  void wake_peers();
  bool sends_pending() const;

  const int rank_;
  const int size_;
  const uint64_t comm_id_;
  const size_t eager_max_bytes_;
  const bool force_ring_copy_;
  const transport::DescribeFn describe_fn_;
  std::unique_ptr<Segment> own_;
  SegmentHeader* own_header_ = nullptr;

  std::atomic<bool> aborted_{false};

  mutable std::mutex mu_;
  std::mutex maps_mu_;  // Peer::maps (never held with mu_)
  std::condition_variable cv_;
  bool driving_ = false;
  // Posted and unexpected messages, budget, active op, poison, completions.
  transport::Matcher matcher_;  // rank_, size_, the unexpected budget, describe_fn_
  const Status& poison_ = matcher_.poison();
  const uint64_t& completions_ = matcher_.completions();
  bool closed_ = false;
  std::atomic<bool> state_published_{false};  // our state word left ALIVE (once; abort too)
  std::vector<std::unique_ptr<BoardWait>> spare_board_waits_;  // take/recycle_board_wait, under mu_
  bool peer_reads_ = false;  // SharedBoards::can_read_peers (set once at creation)
  std::vector<std::unique_ptr<Peer>> peers_;
  int64_t last_liveness_us_ = 0;
  transport::WaitDriver waiter_{*this, {cv_, driving_, completions_, aborted_, poison_, closed_}, rank_, "shm",
                                transport::WaitDriver::ExpiredDeadline::kOnePass};  // last: refers to the above
};

// Wakes waiters when completions happened while it was alive (mutex held throughout).
class CompletionNotifier {
 public:
  CompletionNotifier(const uint64_t* completions, std::function<void()> notify)
      : completions_(completions), before_(*completions), notify_(std::move(notify)) {}
  ~CompletionNotifier() {
    if (*completions_ != before_) notify_();
  }

 private:
  const uint64_t* completions_;
  uint64_t before_;
  std::function<void()> notify_;
};

}  // namespace shm
}  // namespace collx
