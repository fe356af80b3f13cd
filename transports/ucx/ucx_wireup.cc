// Completing every endpoint's connection before create_ucx_transport returns.
//
// Why: UCX connects an endpoint lazily, by a wire-up handshake run by both workers' progress
// after the first operation. Left lazy, a pair of ranks that first talk inside a collective
// may still be half connected when a third rank fails and closes its endpoints, and
// Debian's UCX 1.13 then asserts in its TCP transport (tcp_iface.c:307, an event for a CLOSED
// TCP endpoint) and kills the process. Here every rank sends one WIREUP note (16 bytes) to
// every peer, flushes each endpoint, and waits for every peer's note: a peer's note arrives
// only once its endpoint to us is connected, and ours leave only once ours is, so on return
// no connection of this communicator is still being set up. Cost: one small message each
// way per pair (see README.md, Setup).
#ifdef COLLX_HAVE_UCX
#include <cstring>

#include "transports/ucx/ucx_engine.h"

namespace collx {
namespace ucx {

namespace {
constexpr uint32_t kWireupMagic = 0x57585543;  // "CUXW"

// The exchange's UCX operations are polled, not called back: UCX never calls into memory
// wire_up owns, and each request is freed wherever the exchange stops.

const char* op_name(WireupOp::Kind kind) {
  switch (kind) {
    case WireupOp::kRecv: return "receiving its wire-up note";
    case WireupOp::kSend: return "sending our wire-up note";
    case WireupOp::kFlush: return "flushing the endpoint";
  }
  return "?";
}
}  // namespace

Status UcxEngine::wire_up(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  wireup_out_ = WireupNote{kWireupMagic, rank_, comm_id_};
  wireup_in_.assign(size_, WireupNote{});
  std::vector<WireupOp> ops;
  Status status;
  for (int r = 0; r < size_ && status.ok(); ++r) {
    if (r == rank_) continue;  // UCX's `self` transport needs no connection
    Peer& p = *peers_[r];
    ucp_request_param_t recv_param{};
    recv_param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // always a request to test
    ucs_status_ptr_t req =
        ucp_tag_recv_nbx(worker_, &wireup_in_[r], sizeof(WireupNote), wireup_ucx_tag(r), ~uint64_t{0}, &recv_param);
    if (UCS_PTR_IS_ERR(req)) {
      status = make_status(COLLX_ERR_SYSTEM, "ucx transport: rank %d cannot post a UCX receive (%s)", rank_,
                           ucs_status_string(UCS_PTR_STATUS(req)));
      break;
    }
    ops.push_back({WireupOp::kRecv, r, req});
    const ucp_request_param_t plain{};
    req = ucp_tag_send_nbx(p.ep, &wireup_out_, sizeof wireup_out_, wireup_ucx_tag(rank_), &plain);
    if (!UCS_PTR_IS_ERR(req)) {
      if (req != nullptr) ops.push_back({WireupOp::kSend, r, req});
      req = ucp_ep_flush_nbx(p.ep, &plain);
    }
    if (UCS_PTR_IS_ERR(req)) {
      status = make_status(COLLX_ERR_REMOTE, "ucx transport: rank %d cannot connect to rank %d (UCX: %s)", rank_, r,
                           ucs_status_string(UCS_PTR_STATUS(req)));
    } else if (req != nullptr) {
      ops.push_back({WireupOp::kFlush, r, req});
    }
  }
  if (status.ok()) status = await_wireup(lock, ops, deadline);
  // Stopped early: take the receives back (UCX completes a cancelled, unmatched receive at
  // once); sends and flushes end when the endpoints are force-closed at destruction.
  for (WireupOp& op : ops) {
    if (op.req == nullptr) continue;
    if (op.kind == WireupOp::kRecv) ucp_request_cancel(worker_, op.req);
    ucp_request_free(op.req);
  }
  return status;
}

// Progresses until every op of `ops` completed (each is freed and cleared as it does), a
// peer is seen to fail, or the deadline passes.
Status UcxEngine::await_wireup(std::unique_lock<std::mutex>& lock, std::vector<WireupOp>& ops, Deadline deadline) {
  for (;;) {
    const WireupOp* waiting = nullptr;
    for (WireupOp& op : ops) {
      if (op.req == nullptr) continue;
      ucp_tag_recv_info_t info{};
      const ucs_status_t st =
          op.kind == WireupOp::kRecv ? ucp_tag_recv_request_test(op.req, &info) : ucp_request_check_status(op.req);
      if (st == UCS_INPROGRESS) {
        if (waiting == nullptr) waiting = &op;
        continue;
      }
      ucp_request_free(op.req);
      op.req = nullptr;
      if (st != UCS_OK) {
        return make_status(COLLX_ERR_REMOTE, "ucx transport: rank %d lost rank %d while connecting, %s (UCX: %s)",
                           rank_, op.peer, op_name(op.kind), ucs_status_string(st));
      }
      const WireupNote& note = wireup_in_[op.peer];
      if (op.kind == WireupOp::kRecv && (info.length != sizeof note || note.magic != kWireupMagic ||
                                         note.rank != op.peer || note.comm_id != comm_id_)) {
        return make_status(COLLX_ERR_PROTOCOL, "ucx transport: rank %d got a malformed wire-up note from rank %d",
                           rank_, op.peer);
      }
    }
    if (waiting == nullptr) return Status::Ok();
    for (auto& p : peers_) {
      if (p->ep_failed) {
        return make_status(COLLX_ERR_REMOTE, "ucx transport: rank %d lost rank %d while connecting (UCX: %s)",
                           rank_, p->rank, p->failure.c_str());
      }
      if (!p->process.alive()) {
        return make_status(COLLX_ERR_REMOTE, "ucx transport: rank %d died (pid %lld exited) while connecting",
                           p->rank, static_cast<long long>(p->pid));
      }
    }
    if (deadline.expired()) {
      return make_status(COLLX_ERR_TIMEOUT, "ucx transport: rank %d timed out connecting to rank %d (%s)", rank_,
                         waiting->peer, op_name(waiting->kind));
    }
    bool moved = false;
    for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) moved = true;
    if (!moved) idle_wait(lock, deadline);
  }
}

}  // namespace ucx
}  // namespace collx
#endif  // COLLX_HAVE_UCX
