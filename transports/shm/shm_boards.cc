// The shm engine's shared boards (transport::SharedBoards): each rank's board lives in its own
// segment, after its rings, so every peer has it mapped already. Waits on a peer's counter
// are requests like receives: the driver loop completes them (progress() polls them first),
// so deadlines, dead peers, poison and abort reach them the same way.
#include <errno.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transports/shm/shm_cma.h"
#include "transports/shm/shm_engine.h"
#include "transports/transport_checks.h"

namespace collx {
namespace shm {

BoardHeader* ShmEngine::board_header_of(int rank) const {
  return rank == rank_ ? own_->board_header() : peers_[rank]->seg.board_header();
}

uint8_t* ShmEngine::board(int rank, int parity) {
  return rank == rank_ ? own_->board_half(parity) : peers_[rank]->seg.board_half(parity);
}

void ShmEngine::publish(Counter counter, uint64_t value, const OpDesc& desc) {
  BoardCounter& c = own_->board_header()->counters[counter];
  c.stamp_desc[value & 1] = desc;
  c.stamp_value[value & 1] = static_cast<uint32_t>(value);
  // seq_cst pairs with a sleeping peer's seq_cst sleepers increment (idle_wait): either we
  // see it asleep and wake it, or it sees this value before it sleeps.
  c.value.store(value, std::memory_order_seq_cst);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    SegmentHeader* h = peers_[r]->seg.header();
    if (h->sleepers.load(std::memory_order_seq_cst) > 0) notify_segment(h);
  }
  // Another thread of ours (same process, e.g. in-process tests) may drive a wait.
  if (own_header_->sleepers.load(std::memory_order_seq_cst) > 0) notify_segment(own_header_);
}

void ShmEngine::publish_inline(uint64_t round, const OpDesc& desc, const void* data, size_t bytes) {
  InlineSlot& slot = own_->board_header()->inline_slots[round & 1];
  std::memcpy(slot.data, data, std::min(bytes, sizeof slot.data));
  slot.desc = desc;
  slot.round.store(round, std::memory_order_release);
  publish(kArrived, round, desc);
}

const uint8_t* ShmEngine::inline_payload(int rank, uint64_t round, const OpDesc& desc) const {
  const InlineSlot& slot = board_header_of(rank)->inline_slots[round & 1];
  if (slot.round.load(std::memory_order_acquire) != round || slot.desc != desc) return nullptr;
  return slot.data;
}

bool ShmEngine::reached(int peer, Counter counter, uint64_t value, const OpDesc* desc) const {
  const BoardCounter& c = board_header_of(peer)->counters[counter];
  if (c.value.load(std::memory_order_acquire) < value) return false;
  if (desc == nullptr) return true;
  return c.stamped(value) && c.stamp_of(value) == *desc;
}

Status ShmEngine::post_wait(Request* req, int peer, Counter counter, uint64_t value, const OpDesc* desc) {
  COLLX_RETURN_IF_ERROR(check_args(req, peer, nullptr, 0));
  if (counter < 0 || counter >= kNumCounters) {
    return make_status(COLLX_ERR_INVALID_ARG, "rank %d: no shared-board counter %d", rank_, static_cast<int>(counter));
  }
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  Peer& p = *peers_[peer];
  if (p.departed) {
    // What it published before it left stands; nothing more will come.
    if (!reached(peer, counter, value, desc)) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);
    transport::fill_posted_request(req, false, peer, kBoardWaitTag, nullptr, 0, desc ? *desc : OpDesc{});
    req->complete_ok();
    return Status::Ok();
  }
  BoardWait* wait = take_board_wait();
  wait->counter = counter;
  wait->value = value;
  wait->check_desc = desc != nullptr;
  wait->desc = desc ? *desc : OpDesc{};
  transport::fill_posted_request(req, false, peer, kBoardWaitTag, nullptr, 0, desc ? *desc : OpDesc{});
  req->transport_private = wait;
  p.board_waits.push_back(req);
  return Status::Ok();
}

bool ShmEngine::poll_board_waits(Peer& p) {
  if (p.board_waits.empty()) return false;
  bool moved = false;
  const BoardHeader* board = board_header_of(p.rank);
  for (size_t i = 0; i < p.board_waits.size();) {
    Request* req = p.board_waits[i];
    auto* wait = static_cast<BoardWait*>(req->transport_private);
    const BoardCounter& c = board->counters[wait->counter];
    if (c.value.load(std::memory_order_acquire) < wait->value) {
      ++i;
      continue;
    }
    Status status;
    if (wait->check_desc) {
      // The stamp of an exact value cannot change until we publish progress past it; a
      // stamp of another value means the peer skipped rounds, which only a peer running
      // other collectives than ours does.
      const bool stamped = c.stamped(wait->value);
      if (!stamped || c.stamp_of(wait->value) != wait->desc) {
        status = make_status(COLLX_ERR_MISMATCH,
                             "rank %d is running %s in shared memory but rank %d reached that round (%" PRIu64
                             ") running %s",
                             rank_, transport::describe_desc(describe_fn_, wait->desc).c_str(), p.rank, wait->value,
                             stamped ? transport::describe_desc(describe_fn_, c.stamp_of(wait->value)).c_str()
                                                        : "another collective");
      }
    }
    p.board_waits[i] = p.board_waits.back();
    p.board_waits.pop_back();
    recycle_board_wait(wait);
    moved = true;
    matcher_.complete(req, status);
    if (!status.ok()) {
      poison_locked(status, true);
      return true;
    }
  }
  return moved;
}

BoardWait* ShmEngine::take_board_wait() {
  if (spare_board_waits_.empty()) return new BoardWait;
  BoardWait* wait = spare_board_waits_.back().release();
  spare_board_waits_.pop_back();
  return wait;
}

void ShmEngine::recycle_board_wait(BoardWait* wait) noexcept {
  std::unique_ptr<BoardWait> owned(wait);  // deleted here if the spares cannot take it
  try {
    spare_board_waits_.push_back(std::move(owned));
  } catch (...) {
  }
}

void ShmEngine::forget_board_wait(Peer& p, Request* req) {
  for (size_t i = 0; i < p.board_waits.size(); ++i) {
    if (p.board_waits[i] != req) continue;
    p.board_waits[i] = p.board_waits.back();
    p.board_waits.pop_back();
    break;
  }
  recycle_board_wait(static_cast<BoardWait*>(req->transport_private));
  req->transport_private = nullptr;
}

bool ShmEngine::probe_peer_reads() {
  if (force_ring_copy_) return false;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const Peer& p = *peers_[r];
    uint64_t magic = 0;
    int error = 0;
    if (pull_from_peer(p.pid, p.seg.header()->owner_address, &magic, sizeof magic, &error) != PullResult::kOk ||
        magic != kSegmentMagic) {
      return false;
    }
  }
  return true;
}

Status ShmEngine::read_peer(int peer, uint64_t remote, void* local, size_t bytes) {
  if (peer < 0 || peer >= size_ || !peer_reads_) {
    return make_status(COLLX_ERR_INTERNAL, "rank %d: read_peer(%d) without cross-memory attach", rank_, peer);
  }
  // A peer that failed or aborted after it published its addresses may have let its caller
  // free the buffers: learn of it first (and name it) rather than read them.
  const Peer& p = *peers_[peer];
  if (static_cast<RankState>(p.seg.header()->state.load(std::memory_order_acquire)) != RankState::kAlive) {
    COLLX_RETURN_IF_ERROR(peer_news(peer));
  }
  int error = 0;
  const PullResult result = pull_from_peer(p.pid, remote, local, bytes, &error);
  if (result == PullResult::kOk) return Status::Ok();
  COLLX_RETURN_IF_ERROR(peer_news(peer));  // it died or failed while we read
  // Alive and well, but its buffer is not there: shorter than the call says, or freed.
  return make_status(COLLX_ERR_INVALID_ARG, "rank %d: reading %zu bytes of rank %d's buffer in place failed: %s",
                     rank_, bytes, peer, std::strerror(error));
}

Status ShmEngine::peer_news(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(&completions_, [this] { notify_waiters(); });
  COLLX_RETURN_IF_ERROR(usable_locked());
  check_peers(/*check_processes=*/true);
  COLLX_RETURN_IF_ERROR(poison_);
  if (peers_[peer]->departed) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);
  return Status::Ok();
}

void ShmEngine::publish_active_op(const OpDesc& desc) {
  BoardHeader* board = own_->board_header();
  uint64_t words[3];
  std::memcpy(words, &desc, sizeof words);
  const uint64_t version = board->active_version.load(std::memory_order_relaxed);
  board->active_version.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < 3; ++i) board->active_words[i].store(words[i], std::memory_order_relaxed);
  board->active_version.store(version + 2, std::memory_order_release);
}

bool ShmEngine::peer_active_op(const Peer& p, OpDesc* out) const {
  const BoardHeader* board = p.seg.board_header();
  const uint64_t before = board->active_version.load(std::memory_order_acquire);
  if (before == 0 || (before & 1) != 0) return false;
  uint64_t words[3];
  for (int i = 0; i < 3; ++i) words[i] = board->active_words[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (board->active_version.load(std::memory_order_relaxed) != before) return false;
  std::memcpy(out, words, sizeof words);
  return true;
}

void ShmEngine::check_peer_active_op(Peer& p) {
  const OpDesc* active = matcher_.active();
  if (active == nullptr || active->seq == 0) return;
  OpDesc theirs;
  if (!peer_active_op(p, &theirs) || theirs.seq != active->seq || theirs == *active) return;
  poison_locked(make_status(COLLX_ERR_MISMATCH, "rank %d is running %s but rank %d is running %s", rank_,
                            transport::describe_desc(describe_fn_, *active).c_str(), p.rank,
                            transport::describe_desc(describe_fn_, theirs).c_str()),
                true);
}

}  // namespace shm
}  // namespace collx
