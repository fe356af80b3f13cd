// The TCP transport's engine: per-peer sockets, send queues, receive state machines,
// matching and failure handling. Internal to transports/tcp.
//
// Threads: every public method is thread-safe. One mutex guards all state. There is no
// progress thread: a thread inside wait_all becomes the "driver" and runs epoll_wait without
// the mutex, then takes it to handle the events; other waiters sleep on a condition variable
// that the driver notifies on completions and when it stops driving. abort() takes no lock.
//
// Implementation files: tcp_engine.cc (public API, waiting), tcp_events.cc (epoll, late
// connections, failures, poison), tcp_recv.cc (reading, matching), tcp_send.cc (writing),
// tcp_unacked.cc (peers that stopped acknowledging sent data).
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
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
#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_mesh.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/tcp/wire.h"

namespace collx {
namespace tcp {

using transport::OpDesc;
using transport::Request;

constexpr size_t kRxBufferBytes = 64 << 10;  // per-socket receive buffer
// epoll data of the engine's fds.
constexpr uint64_t kTokenWake = 0;
constexpr uint64_t kTokenListener = 1;
constexpr uint64_t kTokenSocketBase = 2;  // + peer * sockets_per_peer + index
constexpr uint64_t kStrayTokenBit = 1ull << 62;  // | stray id

// A message being received or buffered: announced by its offset-0 fragment on socket 0.
// Matching, staging and delivery are the matcher's (transports/common/matcher.h).
struct InMsg : transport::InMessage {
  uint64_t claimed = 0;  // payload bytes covered by fragment headers seen so far
};

struct SendOp;

// One frame queued on a socket: header + payload (user memory for DATA, `text` for POISON).
struct OutFrame {
  uint8_t header[kFrameHeaderBytes];
  const uint8_t* data = nullptr;
  size_t data_bytes = 0;
  size_t sent = 0;          // bytes of header + payload written so far
  SendOp* op = nullptr;     // nullptr: a control frame, owned by the socket queue
  int socket = 0;           // index of the socket whose queue holds it
  std::string text;
  size_t total() const { return kFrameHeaderBytes + data_bytes; }
};

// A posted send: its fragments, one frame each.
struct SendOp {
  Request* req = nullptr;
  int peer = 0;
  size_t frames_left = 0;
  uint64_t payload_sent = 0;
  bool failing = false;          // collected for failure (see fail_peer_requests)
  std::vector<OutFrame> frames;  // never resized after posting: sockets hold pointers
  bool started() const {
    for (const auto& f : frames) {
      if (f.sent > 0) return true;
    }
    return false;
  }
};

enum class RxState {
  kHeader,        // next bytes are a frame header
  kPayload,       // receiving the payload of `hdr`
  kWaitAnnounce,  // parsed a fragment of a message socket 0 has not announced yet: paused
  kWaitBudget,    // parsed an announcement the unexpected budget cannot hold: paused
  kClosed,        // end of stream (after GOODBYE) or failed
};

struct Socket {
  int peer = 0;
  int index = 0;
  UniqueFd fd;
  uint64_t token = 0;  // epoll data

  // Receive side.
  std::unique_ptr<uint8_t[]> rbuf;  // small frames are parsed from here, several per recv()
  size_t rpos = 0, rlen = 0;        // unparsed bytes are rbuf[rpos, rlen)
  RxState rx = RxState::kHeader;
  FrameHeader hdr;                  // the frame being received (or the paused one)
  InMsg* msg = nullptr;             // DATA payload destination
  uint64_t pos = 0;                 // next payload byte: offset in the message (or in `text`)
  uint64_t left = 0;                // payload bytes of this frame still to come
  std::string text;                 // POISON text
  bool maybe_drained = false;       // the last recv() returned less than asked
  bool goodbye_received = false;
  bool rdhup = false;               // the peer shut down its side (seen while paused)
  bool hup = false;                 // hang-up/error seen while paused (not registered then)

  // Send side.
  std::deque<OutFrame*> sendq;
  bool send_broken = false;
  // The error that broke sending: the kernel reports a socket error once, so a read after a
  // failed write sees only the end of stream.
  int send_errno = 0;
  bool mid_frame = false;           // set by poison: a frame was cut off, nothing more may go
  // Unacknowledged-data check (tcp_unacked.cc): set by every write, and turned by the next
  // check into `last_write_checked`, a time no earlier than the last write.
  bool wrote_since_check = false;
  std::chrono::steady_clock::time_point last_write_checked;

  // epoll registration.
  bool registered = false;
  uint32_t armed = 0;
  bool in_ready = false;
};

struct Peer {
  int rank = 0;
  std::string address;
  std::vector<std::unique_ptr<Socket>> sockets;  // empty for this rank itself
  uint64_t next_send_id = 1;
  uint64_t last_announced = 0;                   // msg ids announced so far are <= this
  int goodbyes = 0;
  bool departed = false;  // sent GOODBYE on every socket
  bool closing = false;   // shut down or failed a write: read everything it sent, budget or not
};

// A connection to the listen port after setup: read its HELLO, then drop it.
struct Stray {
  UniqueFd fd;
  std::string remote;
  std::chrono::steady_clock::time_point accepted_at;
  uint8_t hello[kHelloBytes];
  size_t got = 0;
};

class TcpEngine final : public TcpTransport, private transport::WaitHooks, private transport::MatchHooks {
 public:
  TcpEngine(const TcpTransportParams& params, UniqueFd listener, SocketAddress listen_address,
            const std::vector<SocketAddress>& peer_addresses, MeshSockets sockets);
  ~TcpEngine() override;
  Status init();

  const char* name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string listen_address() const override { return listen_address_.to_string(); }

  COLLX_TRANSPORT_ENGINE_OVERRIDES;

 private:
  friend class CompletionNotifier;

  // ---- tcp_engine.cc
  Status usable_locked() { return waiter_.usable(); }  // under mu_
  Status check_args(const Request* req, int peer, const void* buf, size_t bytes) const {
    return transport::check_post_args(req, peer, size_, buf, bytes);
  }
  void flush_for_close(std::unique_lock<std::mutex>& lock, Deadline deadline);
  void close_sockets(std::unique_lock<std::mutex>& lock, bool orderly, Deadline deadline);
  Status aborted_status() const { return waiter_.aborted_status(); }
  COLLX_WAIT_HOOKS_OVERRIDES;  // for waiter_
  // transport::MatchHooks, for matcher_ (tcp_recv.cc).
  void matcher_poison(const Status& status, bool notify_peers) override;
  void matcher_resume(int peer) override;
  void matcher_took_unexpected(transport::InMessage*) override {}  // its fragments land in staging

  // ---- tcp_events.cc
  void drive_once(std::unique_lock<std::mutex>& lock, Deadline deadline);
  bool driver_satisfied() const;
  void handle_event(uint64_t token, uint32_t events);
  void update_epoll(Socket& s);
  void schedule_read(Socket& s);
  void process_ready();
  void wake_driver();
  void accept_strays();
  void service_stray(uint64_t id);
  void drop_stray(uint64_t id, const std::string& reason);
  void expire_strays();
  void on_stream_end(Socket& s, int error);  // error 0: orderly end of stream
  void on_send_error(Socket& s, int error);
  void peer_departed(Peer& p);
  void protocol_error(Socket& s, const std::string& why);
  void poison_locked(const Status& status, bool notify_peers);
  void fail_peer_requests(Peer& p, const Status& status, std::vector<SendOp*>* ops);
  Status unreachable_status(const Peer& p, const std::string& reason) const;

  // ---- tcp_unacked.cc
  void check_unacked_data();
  void check_unacked_socket(Socket& s, std::chrono::steady_clock::time_point now);

  // ---- tcp_recv.cc
  void read_socket(Socket& s);
  ssize_t fill_rbuf(Socket& s);
  uint8_t* payload_target(Socket& s);
  bool parse_header(Socket& s);
  bool handle_data_header(Socket& s);
  bool announce(Socket& s);
  void receive_payload_bytes(Socket& s, size_t n);
  void finish_frame(Socket& s);
  void resume_announce_waiters(Peer& p);
  std::string other_lost_peers(int reported) const;

  // ---- tcp_send.cc
  void write_socket(Socket& s);
  void frame_written(OutFrame* frame);
  void queue_control_frame(Socket& s, FrameType type, uint64_t tag, const std::string& text);
  void send_poison_frames(const Status& status);

  // Immutable after construction.
  const int rank_;
  const int size_;
  const uint64_t comm_id_;
  const int nsocks_;
  const size_t stripe_min_bytes_;
  const int hello_timeout_ms_;
  const int unacked_timeout_ms_;  // 0: no unacknowledged-data check
  const transport::DescribeFn describe_fn_;
  const SocketAddress listen_address_;
  MeshParams mesh_params_;       // what late HELLOs are checked against
  std::vector<int> abort_fds_;   // every peer socket, for abort() (which takes no lock)

  // Touched without the mutex.
  std::atomic<bool> aborted_{false};
  std::atomic<bool> fds_closed_{false};
  std::atomic<int> abort_in_progress_{0};
  UniqueFd wake_fd_;  // eventfd: abort() and other threads wake the driver

  // Guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Posted and unexpected messages, budget, active op, poison, completions.
  transport::Matcher matcher_;  // rank_, size_, the unexpected budget, describe_fn_
  const Status& poison_ = matcher_.poison();
  const uint64_t& completions_ = matcher_.completions();
  bool driving_ = false;     // a thread owns the driver role
  bool in_epoll_ = false;    // ... and sits in epoll_wait without the mutex
  bool wake_pending_ = false;
  // The requests the driver waits for: once they are done it stops reading (leaving the
  // rest for the next round) so its caller can post the next receive before the next
  // message is announced; otherwise back-to-back large messages would all land unexpected.
  Request* const* driver_reqs_ = nullptr;
  size_t driver_count_ = 0;
  bool peers_notified_ = false;  // POISON frames went out (once)
  bool closed_ = false;
  UniqueFd epoll_fd_;
  UniqueFd listener_;
  std::vector<Peer> peers_;
  std::vector<Socket*> ready_;  // sockets with parsed-but-unprocessed input (resumed or over quota)
  std::map<uint64_t, Stray> strays_;
  uint64_t next_stray_id_ = 0;
  std::chrono::steady_clock::time_point next_unacked_check_;
  epoll_event events_[64];      // used by the driver only
  transport::WaitDriver waiter_{*this, {cv_, driving_, completions_, aborted_, poison_, closed_}, rank_, "TCP",
                                transport::WaitDriver::ExpiredDeadline::kOnePass};  // last: refers to the above
};

// Records the completion count at construction; at destruction (mutex still held) wakes
// waiters and the driver when something completed in between. For API paths that complete
// requests outside the driver.
class CompletionNotifier {
 public:
  explicit CompletionNotifier(TcpEngine* engine) : engine_(engine), before_(engine->completions_) {}
  ~CompletionNotifier();

 private:
  TcpEngine* engine_;
  uint64_t before_;
};

}  // namespace tcp
}  // namespace collx
