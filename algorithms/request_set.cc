#include "algorithms/request_set.h"

#include <new>
#include <vector>

namespace collx {
namespace algo {

RequestSet::RequestSet(const Context& ctx, const CollArgs& args, size_t capacity)
    : transport_(ctx.transport),
      rank_at_(ctx.rank_at),
      desc_(args.desc),
      deadline_(args.deadline),
      capacity_(capacity),
      requests_(capacity > 0 ? new (std::nothrow) transport::Request[capacity] : nullptr) {}

Status RequestSet::init_status() const {
  if (capacity_ > 0 && !requests_) {
    return make_status(COLLX_ERR_NO_MEMORY, "cannot allocate %zu transport requests", capacity_);
  }
  return Status::Ok();
}

static Status check_step(uint64_t step) {
  if (step >= transport::kCollMaxSteps) {
    return make_status(COLLX_ERR_INTERNAL, "collective step %llu exceeds the tag space (%llu steps)",
                       static_cast<unsigned long long>(step),
                       static_cast<unsigned long long>(transport::kCollMaxSteps));
  }
  return Status::Ok();
}

Status RequestSet::post_send(size_t index, int peer, uint64_t step, const void* buf, size_t bytes) {
  COLLX_RETURN_IF_ERROR(check_step(step));
  if (rank_at_) peer = rank_at_[peer];
  return transport_->post_send(&requests_[index], peer, transport::coll_tag(desc_.seq, step), buf,
                               bytes, desc_);
}

Status RequestSet::post_recv(size_t index, int peer, uint64_t step, void* buf, size_t bytes) {
  COLLX_RETURN_IF_ERROR(check_step(step));
  if (rank_at_) peer = rank_at_[peer];
  return transport_->post_recv(&requests_[index], peer, transport::coll_tag(desc_.seq, step), buf,
                               bytes, desc_);
}

Status RequestSet::wait(size_t index) {
  transport::Request* request = &requests_[index];
  if (!request->done()) {
    COLLX_RETURN_IF_ERROR(transport_->wait_all(&request, 1, deadline_));
  }
  return request->failed() ? request->status() : Status::Ok();
}

Status RequestSet::wait_all() {
  std::vector<transport::Request*> pending;
  for (size_t i = 0; i < capacity_; ++i) {
    transport::Request* request = &requests_[i];
    if (request->failed()) return request->status();
    if (!request->done()) pending.push_back(request);
  }
  if (pending.empty()) return Status::Ok();
  COLLX_RETURN_IF_ERROR(transport_->wait_all(pending.data(), pending.size(), deadline_));
  for (transport::Request* request : pending) {
    if (request->failed()) return request->status();
  }
  return Status::Ok();
}

void RequestSet::cancel_pending() {
  if (!requests_) return;
  std::vector<transport::Request*> pending;
  for (size_t i = 0; i < capacity_; ++i) {
    if (!requests_[i].done()) pending.push_back(&requests_[i]);
  }
  if (!pending.empty()) transport_->cancel(pending.data(), pending.size());
}

}  // namespace algo
}  // namespace collx
