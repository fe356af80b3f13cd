// The UCX engine's failure handling: peers that died or left, poison (with notification),
// abort, and making UCX let go of the buffers of failed or cancelled requests. Mutex held.
#ifdef COLLX_HAVE_UCX
#include <unistd.h>

#include <algorithm>
#include <cinttypes>

#include "lib/common/log.h"
#include "transports/transport_checks.h"
#include "transports/ucx/ucx_engine.h"

namespace collx {
namespace ucx {

namespace {
constexpr int64_t kLivenessPeriodUs = 100 * 1000;
// How long poison(notify) progresses UCX so the POISON messages leave.
constexpr int64_t kNotifyBudgetMs = 200;
}  // namespace

// ---- peers

void UcxEngine::on_ep_error(Peer* p, ucs_status_t status) {
  // Decided in progress(), after the headers that arrived with it: a GOODBYE may be among them.
  p->ep_failed = true;
  if (p->failure.empty()) p->failure = ucs_status_string(status);
}

void UcxEngine::check_peers(bool force) {
  const int64_t now = monotonic_us();
  const bool check_processes = force || now - last_liveness_us_ >= kLivenessPeriodUs;
  if (check_processes) last_liveness_us_ = now;
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.rank == rank_ || p.departed || p.failure_reported || !poison_.ok()) continue;
    bool died = false;
    if (check_processes && !p.process.alive()) {
      // Take what it sent before it went (its GOODBYE, if it closed in order).
      while (ucp_worker_progress(worker_) != 0) {
      }
      process_arrivals();
      if (p.departed || !poison_.ok()) continue;
      died = true;
      p.failure_reported = true;
      poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d died (pid %lld exited)", p.rank,
                                static_cast<long long>(p.pid)),
                    false);
    }
    if (!died && p.ep_failed && p.ep != nullptr) {
      p.failure_reported = true;
      poison_locked(make_status(COLLX_ERR_REMOTE, "lost connection to rank %d (UCX: %s); rank %d died or aborted",
                                p.rank, p.failure.c_str(), p.rank),
                    false);
    }
  }
}

void UcxEngine::peer_departed(Peer& p) {
  p.departed = true;
  fail_peer_requests(p, make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", p.rank));
}

void UcxEngine::fail_peer_requests(Peer& p, const Status& status) {
  matcher_.fail_peer(p.rank, status);
  for (SendOp* op : sends_) {
    if (op->peer == p.rank && op->req) {
      op->req->transport_private = nullptr;
      complete_request(op->req, status);
      op->req = nullptr;
    }
  }
}

void UcxEngine::force_close(Peer& p) {
  if (p.ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  // Forcing needs peer error handling on both sides (UCX's rule); without it the endpoint
  // is flushed instead, which cannot take back operations a dead peer never completes.
  param.flags = p.peer_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &param);
  if (UCS_PTR_IS_PTR(r)) closing_.push_back(r);
  p.ep = nullptr;
  p.ep_failed = true;
  if (p.failure.empty()) p.failure = "closed";
}

// ---- poison

void UcxEngine::poison_locked(const Status& status, bool notify_peers, bool release) {
  if (!matcher_.begin_poison(status)) return;  // fails posted receives
  COLLX_INFO(NET, "rank %d: ucx transport poisoned: %s", rank_, poison_.message().c_str());
  if (notify_peers) {
    const std::string text = poison_.message().substr(0, kMaxPoisonText);
    for (auto& p : peers_) {
      if (p->rank == rank_ || p->ep_failed || p->departed) continue;
      send_message(*p, MsgType::kPoison, nullptr, 0, text.data(), text.size(), OpDesc{}, poison_.cause_code()).ignore();
    }
    // Best effort, but a rank that poisons itself may never wait again: give the
    // notifications a short moment to leave.
    if (release) drain(kNotifyBudgetMs, &UcxEngine::control_sends_done);
  }
  for (SendOp* op : sends_) {
    if (op->req) {
      complete_request(op->req, poison_);
      op->req = nullptr;
    }
  }
  for (InMsg* m : receiving_) {  // released by the matcher: ours to fail
    if (m->recv) {
      complete_request(m->recv, poison_);
      m->recv = nullptr;
    }
  }
  if (release) release_user_buffers(notify_peers ? 1000 : 300);
}

bool UcxEngine::no_user_buffers_in_ucx() {
  for (SendOp* op : sends_) {
    if (op->req == nullptr && op->data_req != nullptr) return false;
  }
  for (InMsg* m : receiving_) {
    if (m->recv == nullptr && m->data_req != nullptr) return false;
  }
  return true;
}

bool UcxEngine::control_sends_done() {
  for (SendOp* op : sends_) {
    if (op->req == nullptr) return false;
  }
  return true;
}

bool UcxEngine::no_ucx_requests() {
  closing_.erase(std::remove_if(closing_.begin(), closing_.end(),
                                [](void* r) {
                                  if (ucp_request_check_status(r) == UCS_INPROGRESS) return true;
                                  ucp_request_free(r);
                                  return false;
                                }),
                 closing_.end());
  for (auto& slot : slots_) {
    if (slot->req != nullptr) return false;
  }
  return sends_.empty() && receiving_.empty() && closing_.empty();
}

// Progresses UCX (only: no matching) until `done` or the budget is spent.
void UcxEngine::drain(int64_t budget_ms, bool (UcxEngine::*done)()) {
  const int64_t until = monotonic_us() + budget_ms * 1000;
  while (!(this->*done)() && monotonic_us() < until) {
    if (ucp_worker_progress(worker_) == 0) ::usleep(200);
  }
}

// Failed or cancelled requests whose buffers UCX still reads or writes: cancel the
// receives, give notifications a moment, then force-close the endpoints involved (which
// makes UCX drop their operations).
void UcxEngine::release_user_buffers(int64_t budget_ms) {
  cancel_data_receives(/*detached_only=*/true);
  drain(std::min<int64_t>(budget_ms, 50), &UcxEngine::no_user_buffers_in_ucx);
  if (no_user_buffers_in_ucx()) return;
  // Peers first, closing second: a forced close completes (and frees) operations at once.
  std::vector<int> involved;
  for (SendOp* op : sends_) {
    if (op->req == nullptr && op->data_req != nullptr) involved.push_back(op->peer);
  }
  for (InMsg* m : receiving_) {
    if (m->recv == nullptr && m->data_req != nullptr) involved.push_back(m->peer);
  }
  if (!involved.empty() && poison_.ok()) {
    // Closing a connection with a transfer cut in half breaks the stream to that peer.
    poison_locked(make_status(COLLX_ERR_ABORTED,
                              "rank %d: a cancelled transfer with rank %d was already under way and UCX could not "
                              "stop it; the connection to rank %d is closed",
                              rank_, involved[0], involved[0]),
                  true, false);
  }
  for (int peer : involved) force_close(*peers_[peer]);
  drain(budget_ms, &UcxEngine::no_user_buffers_in_ucx);
  if (!no_user_buffers_in_ucx()) {
    COLLX_WARN(NET, "rank %d: UCX did not release the buffers of failed requests within %lld ms", rank_,
               static_cast<long long>(budget_ms));
  }
}

// Abort: fail everything and cut every connection, without waiting for anything.
void UcxEngine::abort_locked() {
  if (abort_done_) return;
  abort_done_ = true;
  poison_locked(aborted_status(), false, false);
  cancel_data_receives(/*detached_only=*/false);
  for (auto& p : peers_) force_close(*p);
}

// ucp_request_cancel may complete (and free) the receive inside the call: work on a copy.
void UcxEngine::cancel_data_receives(bool detached_only) {
  std::vector<void*> requests;
  for (InMsg* m : receiving_) {
    if ((!detached_only || m->recv == nullptr) && m->data_req != nullptr && m->data_req != kPosting) {
      requests.push_back(m->data_req);
    }
  }
  for (void* r : requests) ucp_request_cancel(worker_, r);
}

}  // namespace ucx
}  // namespace collx
#endif  // COLLX_HAVE_UCX
