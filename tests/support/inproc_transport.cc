#include "tests/support/inproc_transport.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

namespace collx {
namespace testing {

using transport::OpDesc;
using transport::Request;

struct InprocFabric::Message {
  int src = -1;
  uint64_t tag = 0;
  OpDesc desc;
  size_t bytes = 0;
  std::vector<uint8_t> data;          // eager: the copy taken at send time
  const void* send_buffer = nullptr;  // otherwise the sender's buffer, read at delivery
  Request* send = nullptr;            // the sender's request while it is still pending

  const void* source() const { return send_buffer ? send_buffer : data.data(); }
};

struct InprocFabric::State {
  std::deque<Request*> posted_recvs;  // in post order
  std::deque<Message> unexpected;     // in arrival order
  std::unordered_set<Request*> outstanding;
  Status health;
  bool left = false;
  bool aborted = false;
  bool has_active = false;
  OpDesc active;
  std::condition_variable cv;
  size_t deliveries = 0;
  size_t fail_at_delivery = 0;  // 0: no injected failure
  Status injected;
  bool injected_poisons = true;
  bool sealed = false;
};

// One rank's view. Every method takes the fabric mutex; waits sleep on the rank's
// condition variable, which is notified whenever one of its requests completes or its
// health changes.
class InprocFabric::Endpoint : public transport::Transport {
 public:
  Endpoint(InprocFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}

  const char* name() const override { return "inproc"; }
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size_; }

  Status post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes,
                   const OpDesc& desc) override;
  Status post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes,
                   const OpDesc& desc) override;
  Status wait_all(Request* const* reqs, size_t count, Deadline deadline) override;
  void cancel(Request* const* reqs, size_t count) override;
  void set_active_op(const OpDesc* desc) override;
  void poison(const Status& status, bool notify_peers) override;
  Status health() const override;
  void abort() override;
  void close(Deadline deadline) override;

 private:
  State& state() const { return *fabric_->states_[static_cast<size_t>(rank_)]; }
  Status check_post(int peer, const void* buf, size_t bytes) const;
  void start(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc,
             bool is_send);
  Status timeout_status(Request* const* reqs, size_t count) const;

  InprocFabric* fabric_;
  int rank_;
};

// ------------------------------------------------------------------------------------------
// Fabric

InprocFabric::InprocFabric(int size, InprocOptions options) : size_(size), options_(std::move(options)) {
  for (int r = 0; r < size; ++r) {
    states_.push_back(std::make_unique<State>());
    endpoints_.push_back(std::make_unique<Endpoint>(this, r));
  }
}

InprocFabric::~InprocFabric() = default;

transport::Transport* InprocFabric::endpoint(int rank) { return endpoints_[static_cast<size_t>(rank)].get(); }

void InprocFabric::run(const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

size_t InprocFabric::outstanding_requests(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_[static_cast<size_t>(rank)]->outstanding.size();
}

size_t InprocFabric::unexpected_messages(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_[static_cast<size_t>(rank)]->unexpected.size();
}

size_t InprocFabric::deliveries(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_[static_cast<size_t>(rank)]->deliveries;
}

void InprocFabric::fail_delivery(int rank, size_t nth, Status status, bool poison_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  State& st = *states_[static_cast<size_t>(rank)];
  st.fail_at_delivery = st.deliveries + nth;
  st.injected = std::move(status);
  st.injected_poisons = poison_rank;
}

void InprocFabric::seal(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[static_cast<size_t>(rank)]->sealed = true;
}

size_t InprocFabric::seal_violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seal_violations_;
}

size_t InprocFabric::tag_reuses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tag_reuses_;
}

std::string InprocFabric::describe(const OpDesc& desc) const {
  if (options_.describe) return options_.describe(desc);
  return string_printf("op(kind %d, datatype %d, op %d, algorithm %d, root %d, count %llu, seq %llu)",
                       desc.kind, desc.datatype, desc.op, desc.algorithm, desc.root,
                       static_cast<unsigned long long>(desc.count), static_cast<unsigned long long>(desc.seq));
}

Status InprocFabric::mismatch_status(int sender, int receiver, uint64_t tag, size_t sent_bytes,
                                     const OpDesc& sent, size_t expected_bytes,
                                     const OpDesc& expected) const {
  return make_status(COLLX_ERR_MISMATCH,
                     "rank %d sent %zu bytes for %s (tag %#llx) but rank %d expected %zu bytes for %s",
                     sender, sent_bytes, describe(sent).c_str(), static_cast<unsigned long long>(tag),
                     receiver, expected_bytes, describe(expected).c_str());
}

void InprocFabric::note_touch_locked(int owner) {
  if (states_[static_cast<size_t>(owner)]->sealed) ++seal_violations_;
}

void InprocFabric::complete_locked(int owner, Request* req, const Status& status) {
  State& st = *states_[static_cast<size_t>(owner)];
  st.outstanding.erase(req);
  if (status.ok()) {
    req->complete_ok();
  } else {
    req->complete_error(status);
  }
  st.cv.notify_all();
}

Status InprocFabric::deliver_locked(int src, int dst, Request* recv, const Message& msg) {
  State& to = *states_[static_cast<size_t>(dst)];
  if (msg.bytes != recv->bytes || msg.desc != recv->desc) {
    Status mismatch = mismatch_status(src, dst, msg.tag, msg.bytes, msg.desc, recv->bytes, recv->desc);
    complete_locked(dst, recv, mismatch);
    if (msg.send) complete_locked(src, msg.send, mismatch);
    // Both ranks called different operations: both are told, naming both calls.
    poison_locked(dst, mismatch, false);
    poison_locked(src, mismatch, false);
    return mismatch;
  }
  ++to.deliveries;
  if (to.fail_at_delivery != 0 && to.deliveries == to.fail_at_delivery) {
    Status injected = to.injected;
    complete_locked(dst, recv, injected);
    if (msg.send) complete_locked(src, msg.send, Status::Ok());
    if (to.injected_poisons) poison_locked(dst, injected, true);
    return injected;
  }
  if (msg.bytes > 0) {
    note_touch_locked(dst);
    if (msg.send) note_touch_locked(src);
    std::memcpy(recv->buffer, msg.source(), msg.bytes);
  }
  complete_locked(dst, recv, Status::Ok());
  if (msg.send) complete_locked(src, msg.send, Status::Ok());
  return Status::Ok();
}

void InprocFabric::poison_locked(int rank, const Status& status, bool notify_peers) {
  State& st = *states_[static_cast<size_t>(rank)];
  if (!st.health.ok()) return;
  st.health = status;
  // Fail everything this rank has pending: its posted receives and its sends still waiting
  // (rendezvous) in other ranks' queues.
  std::vector<Request*> pending(st.outstanding.begin(), st.outstanding.end());
  st.posted_recvs.clear();
  for (Request* req : pending) {
    if (req->is_send) {
      auto& queue = states_[static_cast<size_t>(req->peer)]->unexpected;
      queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const Message& m) { return m.send == req; }),
                  queue.end());
    }
    complete_locked(rank, req, status);
  }
  st.cv.notify_all();
  if (!notify_peers) return;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank) continue;
    poison_locked(peer,
                  make_status(COLLX_ERR_REMOTE, "rank %d failed: %s", rank, status.message().c_str()),
                  false);
  }
}

// ------------------------------------------------------------------------------------------
// Endpoint

Status InprocFabric::Endpoint::check_post(int peer, const void* buf, size_t bytes) const {
  const State& st = state();
  if (!st.health.ok()) return st.health;
  if (peer < 0 || peer >= fabric_->size_) {
    return make_status(COLLX_ERR_INVALID_ARG, "peer %d out of range [0, %d)", peer, fabric_->size_);
  }
  if (bytes > 0 && buf == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "NULL buffer of %zu bytes", bytes);
  return Status::Ok();
}

void InprocFabric::Endpoint::start(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes,
                                   const OpDesc& desc, bool is_send) {
  req->reset_for_post();
  req->peer = peer;
  req->tag = tag;
  req->is_send = is_send;
  req->buffer = const_cast<void*>(buf);
  req->bytes = bytes;
  req->desc = desc;
  state().outstanding.insert(req);
}

Status InprocFabric::Endpoint::post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes,
                                         const OpDesc& desc) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  COLLX_RETURN_IF_ERROR(check_post(peer, buf, bytes));
  start(req, peer, tag, buf, bytes, desc, true);
  if (fabric_->options_.track_tag_reuse && transport::is_coll_tag(tag) &&
      !fabric_->used_tags_.insert(std::make_tuple(rank_, peer, tag)).second) {
    ++fabric_->tag_reuses_;
  }

  State& to = *fabric_->states_[static_cast<size_t>(peer)];
  if (to.left || to.aborted) {
    fabric_->complete_locked(rank_, req, make_status(COLLX_ERR_REMOTE, "rank %d %s", peer,
                                                     to.aborted ? "aborted" : "left"));
    return Status::Ok();
  }
  // The receiver runs another collective (same sequence number, different call) or has
  // already moved past this one: both called different operations.
  if (to.has_active && transport::is_coll_tag(tag) &&
      (desc.seq < to.active.seq || (desc.seq == to.active.seq && desc != to.active))) {
    Status mismatch = fabric_->mismatch_status(rank_, peer, tag, bytes, desc, bytes, to.active);
    fabric_->poison_locked(peer, mismatch, false);
    fabric_->poison_locked(rank_, mismatch, false);
    return Status::Ok();
  }

  Message msg;
  msg.src = rank_;
  msg.tag = tag;
  msg.desc = desc;
  msg.bytes = bytes;
  auto match = std::find_if(to.posted_recvs.begin(), to.posted_recvs.end(),
                            [&](const Request* r) { return r->peer == rank_ && r->tag == tag; });
  if (match != to.posted_recvs.end()) {
    Request* recv = *match;
    to.posted_recvs.erase(match);
    msg.send_buffer = buf;
    msg.send = req;
    fabric_->deliver_locked(rank_, peer, recv, msg).ignore();
    return Status::Ok();
  }
  if (fabric_->options_.send_mode == InprocOptions::SendMode::kEager) {
    if (bytes > 0) {
      fabric_->note_touch_locked(rank_);
      msg.data.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
    }
    to.unexpected.push_back(std::move(msg));
    fabric_->complete_locked(rank_, req, Status::Ok());
  } else {
    msg.send_buffer = buf;
    msg.send = req;
    to.unexpected.push_back(std::move(msg));
  }
  return Status::Ok();
}

Status InprocFabric::Endpoint::post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes,
                                         const OpDesc& desc) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  COLLX_RETURN_IF_ERROR(check_post(peer, buf, bytes));
  start(req, peer, tag, buf, bytes, desc, false);
  State& st = state();
  auto match = std::find_if(st.unexpected.begin(), st.unexpected.end(),
                            [&](const Message& m) { return m.src == peer && m.tag == tag; });
  if (match != st.unexpected.end()) {
    Message msg = std::move(*match);
    st.unexpected.erase(match);
    fabric_->deliver_locked(peer, rank_, req, msg).ignore();
    return Status::Ok();
  }
  const State& from = *fabric_->states_[static_cast<size_t>(peer)];
  if (from.left || from.aborted) {
    fabric_->complete_locked(rank_, req, make_status(COLLX_ERR_REMOTE, "rank %d %s", peer,
                                                     from.aborted ? "aborted" : "left"));
    return Status::Ok();
  }
  st.posted_recvs.push_back(req);
  return Status::Ok();
}

Status InprocFabric::Endpoint::timeout_status(Request* const* reqs, size_t count) const {
  std::string waiting;
  std::vector<int> named;
  for (size_t i = 0; i < count; ++i) {
    const Request* req = reqs[i];
    if (req->done() || std::find(named.begin(), named.end(), req->peer) != named.end()) continue;
    named.push_back(req->peer);
    if (!waiting.empty()) waiting += ", ";
    waiting += string_printf("rank %d (%s, tag step %llu)", req->peer, req->is_send ? "send" : "receive",
                             static_cast<unsigned long long>(req->tag & (transport::kCollMaxSteps - 1)));
  }
  return make_status(COLLX_ERR_TIMEOUT, "rank %d timed out waiting for %s", rank_, waiting.c_str());
}

Status InprocFabric::Endpoint::wait_all(Request* const* reqs, size_t count, Deadline deadline) {
  std::unique_lock<std::mutex> lock(fabric_->mu_);
  State& st = state();
  for (;;) {
    bool all_done = true;
    for (size_t i = 0; i < count; ++i) {
      if (reqs[i]->failed()) return reqs[i]->status();
      all_done = all_done && reqs[i]->done();
    }
    if (all_done) return Status::Ok();
    if (!st.health.ok()) return st.health;
    if (deadline.expired()) return timeout_status(reqs, count);
    if (deadline.is_never()) {
      st.cv.wait(lock);
    } else {
      st.cv.wait_until(lock, deadline.time_point());
    }
  }
}

void InprocFabric::Endpoint::cancel(Request* const* reqs, size_t count) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  State& st = state();
  for (size_t i = 0; i < count; ++i) {
    Request* req = reqs[i];
    if (req->done() || st.outstanding.count(req) == 0) continue;
    if (req->is_send) {
      auto& queue = fabric_->states_[static_cast<size_t>(req->peer)]->unexpected;
      queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const Message& m) { return m.send == req; }),
                  queue.end());
    } else {
      st.posted_recvs.erase(std::remove(st.posted_recvs.begin(), st.posted_recvs.end(), req),
                            st.posted_recvs.end());
    }
    fabric_->complete_locked(rank_, req, make_status(COLLX_ERR_ABORTED, "request cancelled"));
  }
}

void InprocFabric::Endpoint::set_active_op(const OpDesc* desc) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  State& st = state();
  st.has_active = desc != nullptr;
  if (desc) st.active = *desc;
}

void InprocFabric::Endpoint::poison(const Status& status, bool notify_peers) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  fabric_->poison_locked(rank_, status, notify_peers);
}

Status InprocFabric::Endpoint::health() const {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  return state().health;
}

void InprocFabric::Endpoint::abort() {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  State& st = state();
  st.aborted = true;
  Status aborted = make_status(COLLX_ERR_ABORTED, "rank %d aborted", rank_);
  fabric_->poison_locked(rank_, aborted, false);
  st.health = aborted;  // waiters see ABORTED even when something else poisoned us first
  st.cv.notify_all();
  for (int peer = 0; peer < fabric_->size_; ++peer) {
    if (peer != rank_) fabric_->poison_locked(peer, make_status(COLLX_ERR_REMOTE, "rank %d aborted", rank_), false);
  }
}

void InprocFabric::Endpoint::close(Deadline /*deadline*/) {
  std::lock_guard<std::mutex> lock(fabric_->mu_);
  State& st = state();
  fabric_->poison_locked(rank_, make_status(COLLX_ERR_INVALID_USAGE, "rank %d closed its transport", rank_), false);
  st.left = true;
  // Peers' sends still waiting here and receives waiting for this rank can never complete.
  const Status left = make_status(COLLX_ERR_REMOTE, "rank %d left", rank_);
  std::deque<Message> stranded;
  stranded.swap(st.unexpected);
  for (Message& msg : stranded) {
    if (msg.send) fabric_->complete_locked(msg.src, msg.send, left);
  }
  for (int peer = 0; peer < fabric_->size_; ++peer) {
    if (peer == rank_) continue;
    State& other = *fabric_->states_[static_cast<size_t>(peer)];
    // Unlink before completing: a completed request may be freed by its owner at once.
    std::vector<Request*> doomed;
    auto from_me = [&](Request* r) {
      if (r->peer != rank_) return false;
      doomed.push_back(r);
      return true;
    };
    other.posted_recvs.erase(std::remove_if(other.posted_recvs.begin(), other.posted_recvs.end(), from_me),
                             other.posted_recvs.end());
    for (Request* req : doomed) fabric_->complete_locked(peer, req, left);
  }
}

}  // namespace testing
}  // namespace collx
