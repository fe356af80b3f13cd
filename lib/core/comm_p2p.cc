// Point-to-point send/recv and the requests of nonblocking calls.
//
// Nonblocking sends and receives are posted to the transport at once (so exchanges between
// two ranks cannot deadlock on ordering) and progress whenever a thread waits on the
// transport: collx_test/collx_wait on the request, or any other call on the communicator.
// A send from device buffers over staging is the exception: the host does not wait for the
// copy to staging, so the send is deferred and posted by the poster once the copy ended,
// with the later sends to the same peer and tag behind it (p2p_deferred_sends.h).
#include "lib/common/exception_status.h"
#include "lib/common/log.h"
#include "lib/core/comm.h"
#include "lib/core/comm_device.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

transport::OpDesc p2p_desc(const CollCall& call) {
  transport::OpDesc desc;
  desc.kind = COLLX_COLL_SEND;  // both sides describe the same message
  desc.datatype = static_cast<uint8_t>(call.datatype);
  desc.algorithm = COLLX_ALGO_DIRECT;
  desc.count = call.count;
  desc.seq = 0;
  return desc;
}

// What a deferred send waits for, in its timeout message.
constexpr const char* kStagingCopy =
    "the copy of the send buffer to host staging (queued on the stream after the work already there)";

}  // namespace

Status Communicator::post_p2p(const CollCall& submitted, std::shared_ptr<RequestImpl>* out) {
  LogRankScope log_rank(rank_);
  COLLX_RETURN_IF_ERROR(validate(submitted));
  CollCall call = submitted;  // the buffer's memory kind probed once, here (comm_device.h)
  resolve_mem_kind(&call);
  COLLX_RETURN_IF_ERROR(capture_check(call));
  if (failed_.load(std::memory_order_acquire)) return unusable();
  auto request = std::make_shared<RequestImpl>(shared_from_this(), /*is_p2p=*/true);
  const transport::OpDesc desc = p2p_desc(call);
  const size_t bytes = call.count * datatype_size(call.datatype);
  request->op_deadline_ = deadline_for(call.timeout_ms);
  request->context_ = string_printf("%s %s rank %d (tag %d, %zu bytes) on rank %d of '%s': ",
                                    call.coll == COLLX_COLL_SEND ? "send" : "recv",
                                    call.coll == COLLX_COLL_SEND ? "to" : "from", call.peer, call.tag, bytes,
                                    rank_, name_.c_str());
  transport::Request* tx = &request->tx_request_;
  request->fr_id_ = flight_.start(desc, call.peer, call.coll);  // flight recorder
  const void* sendbuf = call.sendbuf;
  void* recvbuf = call.recvbuf;
  Status st;
  bool on_nccl = false;
  if (device_buffers(call)) {
    int device = -1;
    st = buffer_device(call.coll == COLLX_COLL_SEND ? sendbuf : recvbuf, &device);
    if (st.ok() && nccl_p2p_) {
      // Over NCCL (comm_p2p_nccl.cc): enqueued on the stream, the request is complete as posted.
      st = post_p2p_nccl(call);
      on_nccl = true;
    } else if (st.ok()) {  // staged through pinned memory (comm_p2p_device.h)
      st = call.coll == COLLX_COLL_SEND
               ? P2pStaged::for_send(&p2p_staging_, sendbuf, bytes, call.stream, &request->staged_)
               : P2pStaged::for_recv(&p2p_staging_, recvbuf, bytes, call.stream, &request->staged_);
    }
    if (request->staged_) sendbuf = recvbuf = request->staged_->host();
  }
  const uint64_t tag = static_cast<uint64_t>(call.tag);
  if (st.ok() && !on_nccl && call.coll == COLLX_COLL_SEND &&
      (request->staged_ || deferred_sends_.holds(call.peer, tag))) {
    st = defer_send(request, call.peer, tag, sendbuf, bytes, desc);
  } else if (st.ok() && !on_nccl) {
    st = call.coll == COLLX_COLL_SEND ? transport_->post_send(tx, call.peer, tag, sendbuf, bytes, desc)
                                      : transport_->post_recv(tx, call.peer, tag, recvbuf, bytes, desc);
  }
  if (!st.ok()) {
    request->staged_.reset();
    flight_.end(request->fr_id_, st.code());  // flight recorder
    st = st.with_context(request->context_);
    if (st.code() != COLLX_ERR_INVALID_ARG) fail(st);
    return st;
  }
  *out = std::move(request);
  return Status::Ok();
}

Status Communicator::defer_send(const std::shared_ptr<RequestImpl>& request, int peer, uint64_t tag,
                                const void* buf, size_t bytes, const transport::OpDesc& desc) {
  DeferredSends::ReadyFn ready;  // none: only queued behind an earlier deferred send
  if (const P2pStaged* staged = request->staged_.get()) {
    // The request owns the staging until the ticket is settled or cancelled (wait_p2p).
    ready = [staged](bool* done) { return staged->copied(done); };
  }
  // The entry keeps the request (its transport request and staging) alive until posted;
  // the request keeps this communicator.
  auto post = [this, request, peer, tag, buf, bytes, desc] {
    return transport_->post_send(&request->tx_request_, peer, tag, buf, bytes, desc);
  };
  try {
    request->deferred_ =
        deferred_sends_.defer(peer, tag, std::move(ready), std::move(post), request->op_deadline_, &aborted_, kStagingCopy);
  } catch (...) {
    return current_exception_status("deferring a send until its staging copy ends");
  }
  return Status::Ok();
}

Status Communicator::send_recv(const CollCall& call) {
  std::shared_ptr<RequestImpl> request;
  COLLX_RETURN_IF_ERROR(post_p2p(call, &request));
  LogRankScope log_rank(rank_);
  Status st = wait_p2p(request.get(), Deadline::never());
  flight_.end(request->fr_id_, st.code());  // flight recorder
  return st;
}

// Waits for a point-to-point request until its own deadline (a failure: the communicator
// fails) or `wait_deadline` (not a failure: IN_PROGRESS).
Status Communicator::wait_p2p(RequestImpl* request, Deadline wait_deadline) {
  if (request->deferred_) {
    // A deferred send: first it must be posted (or fail) by the poster.
    Status posted;
    if (!request->deferred_->wait(request->op_deadline_.min(wait_deadline), &posted)) {
      if (!request->op_deadline_.expired()) return Status(COLLX_IN_PROGRESS, "still in progress");
      if (request->deferred_->cancel()) {
        posted = make_status(COLLX_ERR_TIMEOUT, "%s did not end before the deadline", kStagingCopy);
      } else {
        request->deferred_->wait(Deadline::never(), &posted);  // settled meanwhile: at once
      }
    }
    request->deferred_.reset();
    if (!posted.ok()) {
      request->staged_.reset();
      Status st = posted.with_context(request->context_);
      fail(st);
      return st;
    }
  }
  transport::Request* tx = &request->tx_request_;
  if (!tx->done()) {
    const Deadline until = request->op_deadline_.min(wait_deadline);
    Status st = transport_->wait_all(&tx, 1, until);
    if (!st.ok() && !tx->done()) {
      if (st.code() == COLLX_ERR_TIMEOUT && !request->op_deadline_.expired()) {
        return Status(COLLX_IN_PROGRESS, "still in progress");
      }
      transport_->cancel(&tx, 1);
      if (aborted_.load(std::memory_order_acquire)) {
        st = Status(COLLX_ERR_ABORTED, "collx_comm_abort was called while it ran");
      }
      request->staged_.reset();
      st = st.with_context(request->context_);
      fail(st);
      return st;
    }
  }
  Status st = tx->failed() ? tx->status() : Status::Ok();
  // Device buffers: a received message goes on to the device on the caller's stream.
  if (st.ok() && request->staged_) st = request->staged_->deliver();
  request->staged_.reset();
  if (!st.ok()) {
    st = st.with_context(request->context_);
    fail(st);
    return st;
  }
  return Status::Ok();
}

void RequestImpl::finish(Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = std::move(status);
  done_ = true;
  done_cv_.notify_all();
}

bool RequestImpl::test(Status* status) {
  if (is_p2p_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) {
      *status = status_;
      return true;
    }
    Status st = comm_->wait_p2p(this, Deadline::after_ms(0));
    if (st.code() == COLLX_IN_PROGRESS) return false;
    comm_->flight_.end(fr_id_, st.code());  // flight recorder
    status_ = st;
    done_ = true;
    *status = status_;
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) return false;
  *status = status_;
  return true;
}

Status RequestImpl::wait(Deadline wait_deadline) {
  if (is_p2p_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return status_;
    Status st = comm_->wait_p2p(this, wait_deadline);
    if (st.code() == COLLX_IN_PROGRESS) return st;
    comm_->flight_.end(fr_id_, st.code());  // flight recorder
    status_ = st;
    done_ = true;
    return status_;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (wait_deadline.is_never()) {
    done_cv_.wait(lock, [this] { return done_; });
  } else if (!done_cv_.wait_until(lock, wait_deadline.time_point(), [this] { return done_; })) {
    return Status(COLLX_IN_PROGRESS, "still in progress");
  }
  return status_;
}

}  // namespace collx
