// The shm engine's public face: setup, posting, waiting (leader/follower with a futex sleep),
// cancel, poison, abort and close.
#include "transports/shm/shm_engine.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>

#include "lib/common/log.h"
#include "transports/shm/shm_huge_pages.h"
#include "transports/transport_checks.h"

namespace collx {
namespace shm {

namespace {
// A driver with nothing to do polls (yielding the CPU between polls) this long before it
// sleeps on its futex: short enough that idle ranks cost nothing, long enough to catch a
// reply from a peer that is running right now.
constexpr int64_t kSpinUs = 50;
// Longest futex sleep: bounds how late a dead peer (which wakes nobody) is noticed.
constexpr int64_t kMaxSleepUs = 100 * 1000;
}  // namespace

ShmEngine::ShmEngine(const ShmTransportParams& params, std::unique_ptr<Segment> own)
    : rank_(params.rank),
      size_(params.size),
      comm_id_(params.comm_id),
      eager_max_bytes_(params.eager_max_bytes),
      force_ring_copy_(params.force_ring_copy),
      describe_fn_(params.describe),
      own_(std::move(own)),
      matcher_(rank_, size_, params.unexpected_max_bytes, describe_fn_, *this) {
  own_header_ = own_->header();
  for (int r = 0; r < size_; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    peers_.push_back(std::move(p));
  }
}

Status ShmEngine::attach(const std::vector<std::string>& names, const std::vector<pid_t>& pids) {
  std::lock_guard<std::mutex> lock(mu_);
  const pid_t self = ::getpid();
  for (int r = 0; r < size_; ++r) {
    Peer& p = *peers_[r];
    p.pid = pids[r];
    p.same_process = pids[r] == self;
    if (r == rank_) continue;
    COLLX_RETURN_IF_ERROR(p.seg.open(names[r], comm_id_, r, size_, pids[r]));
    // Keys: (sender, receiver) for data rings, offset by size_ for control rings.
    p.in_data = RingView(own_->data_ring(r), own_->ring_cells(own_->data_ring(r)), kDataCells,
                         tsan_sync_address(comm_id_, r, rank_));
    p.in_ctrl = RingView(own_->ctrl_ring(r), own_->ring_cells(own_->ctrl_ring(r)), kCtrlCells,
                         tsan_sync_address(comm_id_, r + size_, rank_));
    p.out_data = RingView(p.seg.data_ring(rank_), p.seg.ring_cells(p.seg.data_ring(rank_)), kDataCells,
                          tsan_sync_address(comm_id_, rank_, r));
    p.out_ctrl = RingView(p.seg.ctrl_ring(rank_), p.seg.ring_cells(p.seg.ctrl_ring(rank_)), kCtrlCells,
                          tsan_sync_address(comm_id_, rank_ + size_, r));
    if (!p.same_process) p.process.watch(p.pid);
  }
  last_liveness_us_ = monotonic_us();
  return Status::Ok();
}

ShmEngine::~ShmEngine() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) {
    // No orderly close: peers must not wait for us (we may be on an error path). If we
    // failed, pass the first reason on so survivors learn the root cause.
    if (poison_.ok()) {
      publish_state(RankState::kAborted, Status::Ok());
    } else {
      publish_state(RankState::kPoisoned, poison_);
    }
    closed_ = true;
    poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: shm transport destroyed", rank_), false);
  }
  for (auto& p : peers_) fail_peer_requests(*p, poison_);
}

void ShmEngine::notify_waiters() {
  cv_.notify_all();
  notify_segment(own_header_);  // the driver may sleep on our futex
}

Status ShmEngine::post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(check_args(req, peer, buf, bytes));
  // A rendezvous send is read by the receiver through the kernel: a buffer sent again and
  // again gets huge pages (shm_huge_pages.h). Before the lock: a collapse takes milliseconds.
  if (peer != rank_ && bytes > eager_max_bytes_ && !force_ring_copy_) {
    if (HugePageCache* cache = process_huge_pages()) cache->offer(buf, bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  if (peer == rank_) return matcher_.send_to_self(req, rank_, tag, buf, bytes, desc);
  Peer& p = *peers_[peer];
  if (p.departed) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);
  transport::fill_posted_request(req, true, peer, tag, buf, bytes, desc);
  auto* op = new SendOp;
  op->req = req;
  op->peer = peer;
  op->msg_id = p.next_send_id++;
  op->rndv = bytes > eager_max_bytes_;
  req->transport_private = op;
  p.sendq.push_back(op);
  push_sends(p);  // latency: into the ring now, not in the next wait
  return Status::Ok();
}

Status ShmEngine::post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes, const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(check_args(req, peer, buf, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  return matcher_.post_recv(req, peer, tag, buf, bytes, desc, peers_[peer]->departed);
}

std::string ShmEngine::wait_pending_detail(const Request& r) const {
  if (!r.is_send && r.tag == kBoardWaitTag) {
    auto* wait = static_cast<const BoardWait*>(r.transport_private);
    if (wait == nullptr) return "shared-memory wait";
    static const char* const kWhat[] = {"its data in shared memory", "its reduced slice", "done reading"};
    const uint64_t at = board_header_of(r.peer)->counters[wait->counter].value.load(std::memory_order_acquire);
    return string_printf("shared-memory round %" PRIu64 ": waiting for %s; it is at round %" PRIu64, wait->value,
                         kWhat[wait->counter], at);
  }
  if (r.is_send) {
    auto* op = static_cast<const SendOp*>(r.transport_private);
    return op == nullptr ? "queued" : op->rndv ? (op->started ? "announced, not yet taken" : "queued")
                                               : (op->started ? "partly in the ring" : "queued");
  }
  auto* m = static_cast<const transport::InMessage*>(r.transport_private);
  return string_printf("%" PRIu64 " received", m ? m->received : 0);
}

// The driver found nothing to do: sleep on our futex until a peer (or abort, or another
// thread of ours) bumps it, at most kMaxSleepUs so dead peers are still noticed.
void ShmEngine::idle_wait(std::unique_lock<std::mutex>& lock, Deadline deadline) {
  own_header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = own_header_->futex.load(std::memory_order_seq_cst);
  // Look once more after announcing ourselves: a peer that pushed before it could see us
  // sleeping did not wake us.
  if (!progress() && !aborted_.load(std::memory_order_acquire)) {
    int64_t timeout_us = kMaxSleepUs;
    if (!deadline.is_never()) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline.time_point() -
                                                                        std::chrono::steady_clock::now());
      timeout_us = std::min<int64_t>(timeout_us, std::max<int64_t>(left.count(), 1));
    }
    lock.unlock();
    futex_wait(&own_header_->futex, seen, timeout_us);
    lock.lock();
  }
  own_header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

Status ShmEngine::wait_all(Request* const* reqs, size_t count, Deadline deadline) {
  return waiter_.wait_all(mu_, reqs, count, deadline);
}

Status ShmEngine::wait_on_aborted() {
  poison_locked(aborted_status(), false);
  return aborted_status();
}

// Poll the rings; with nothing to do yield for kSpinUs, then sleep on our futex.
void ShmEngine::wait_drive(std::unique_lock<std::mutex>& lock, Request* const*, size_t, Deadline deadline,
                           transport::IdlePacer& pacer) {
  const bool moved = progress();
  if (deadline.expired()) return;  // report completions or the timeout, never sleep
  pacer.pace(moved, kSpinUs, lock, [&] { idle_wait(lock, deadline); });
}

void ShmEngine::cancel(Request* const* reqs, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  const Status cancelled = make_status(COLLX_ERR_ABORTED, "cancelled");
  for (size_t i = 0; i < count; ++i) {
    Request* r = reqs[i];
    if (r == nullptr || r->done()) continue;
    Peer& p = *peers_[r->peer];
    if (r->is_send) {
      auto* op = static_cast<SendOp*>(r->transport_private);
      if (op == nullptr) continue;
      if (op->started) {
        // Part of it is in the ring, or the receiver may be reading the buffer right now.
        poison_locked(make_status(COLLX_ERR_ABORTED,
                                  "rank %d: cancelled a send to rank %d that had started (%zu bytes); the stream to "
                                  "rank %d is broken",
                                  rank_, r->peer, r->bytes, r->peer),
                      true);
        continue;
      }
      p.sendq.erase(std::remove(p.sendq.begin(), p.sendq.end(), op), p.sendq.end());
      delete op;
      matcher_.complete(r, cancelled);
    } else if (r->tag == kBoardWaitTag) {
      forget_board_wait(p, r);
      matcher_.complete(r, cancelled);
    } else {
      // Partly received: the rest is consumed and dropped, keeping the ring in step.
      matcher_.cancel_recv(r, cancelled);
    }
  }
}

void ShmEngine::set_active_op(const OpDesc* desc) {
  std::lock_guard<std::mutex> lock(mu_);
  if (desc != nullptr) publish_active_op(*desc);
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  matcher_.set_active(desc, !closed_ && !aborted_.load(std::memory_order_acquire));
}

void ShmEngine::poison(const Status& status, bool notify_peers) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  poison_locked(status, notify_peers);
}

Status ShmEngine::health() const { return waiter_.health(mu_); }

void ShmEngine::abort() {
  // No lock: a thread may be inside the engine. Peers' mappings and our header live until
  // the destructor; publish_state is guarded by its own atomic flag.
  aborted_.store(true, std::memory_order_release);
  publish_state(RankState::kAborted, Status::Ok());
  notify_segment(own_header_);
  cv_.notify_all();
}

void ShmEngine::close(Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  // Take the driver role: flush our sends ourselves.
  while (driving_) {
    notify_segment(own_header_);
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  driving_ = true;
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  bool orderly = poison_.ok() && !aborted_.load();
  // Sends already posted are delivered (rendezvous ones need the receiver to take them).
  while (orderly && sends_pending() && !deadline.expired()) {
    if (!progress()) idle_wait(lock, deadline.min(Deadline::after_ms(10)));
    orderly = poison_.ok() && !aborted_.load();
  }
  closed_ = true;
  if (orderly && !sends_pending()) {
    publish_state(RankState::kLeft, Status::Ok());
  } else {
    publish_state(RankState::kPoisoned,
                  poison_.ok() ? make_status(COLLX_ERR_TIMEOUT, "rank %d closed with sends not delivered", rank_)
                               : poison_);
  }
  poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: the shm transport is closed", rank_), false);
  driving_ = false;
  cv_.notify_all();
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  COLLX_INFO(NET, "rank %d: shm transport closed (%s) in %lld ms", rank_, orderly ? "orderly" : "after a failure",
             static_cast<long long>(elapsed.count()));
}

}  // namespace shm
}  // namespace collx
