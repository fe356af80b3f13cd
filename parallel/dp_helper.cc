// The reducer's launch thread for 16-bit wire types (see DpHelper in dp_internal.h).
// Rounding a bucket to bf16/fp16 and back costs as much CPU as a small collective; done on
// the marking thread it lengthened the backward pass by the whole conversion time
// (collx-bench dp --comm bf16: step/max 1.27). Here it overlaps with the backward pass and
// with the previous bucket's collective. The arithmetic is the same code as before, so the
// results are bit-identical; only the thread changes.
#include <algorithm>

#include "parallel/dp_internal.h"

namespace collx {
namespace parallel {

namespace {
// How long the helper waits on a collective before looking for a newly handed-over
// bucket: short, so a bucket is rounded while the previous one is still on the wire.
constexpr int64_t kWaitSliceMs = 1;
// The idle wait for work re-checks on its own now and then (every wait has a deadline).
constexpr auto kIdleRecheck = std::chrono::seconds(1);
}  // namespace

DpHelper::DpHelper(collx_dp_s* dp) : dp_(dp), thread_([this] { run(); }) {}

DpHelper::~DpHelper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void DpHelper::launch(size_t b) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(b);
  }
  work_.notify_all();
}

bool DpHelper::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return !queue_.empty() || !flight_.empty();
}

void DpHelper::record_error(collx_status_t st, size_t b, const std::string& msg) {
  if (error_ != COLLX_OK) return;  // the first failure is the one reported
  error_ = st;
  error_bucket_ = b;
  error_msg_ = msg;
}

collx_status_t DpHelper::wait_idle(const Deadline& deadline, size_t* bucket, std::string* msg) {
  std::unique_lock<std::mutex> lock(mu_);
  // In steps of at most kIdleRecheck, so that a deadline of "never" is no special case.
  while (!(queue_.empty() && flight_.empty()) && !deadline.expired())
    done_.wait_until(lock, std::min(deadline.time_point(), Deadline::Clock::now() + kIdleRecheck));
  if (!(queue_.empty() && flight_.empty())) {
    *bucket = !flight_.empty() ? flight_.front() : queue_.front();
    return COLLX_IN_PROGRESS;
  }
  const collx_status_t st = error_;
  *bucket = error_bucket_;
  *msg = error_msg_;
  error_ = COLLX_OK;
  return st;
}

// Launch first (a bucket handed over must reach the wire soon), then retire the oldest
// collective in flight; they finish in launch order on one communicator.
void DpHelper::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!queue_.empty()) {
      const size_t b = queue_.front();  // stays queued while launching: finish sees it busy
      lock.unlock();
      std::string why;
      const collx_status_t st = dp_start_bucket(dp_, b, &why);
      lock.lock();
      queue_.pop_front();
      if (st != COLLX_OK)
        record_error(st, b, why);
      else if (dp_->buckets[b].request)
        flight_.push_back(b);
      done_.notify_all();
      continue;
    }
    if (!flight_.empty()) {
      const size_t b = flight_.front();
      collx_dp_s::Bucket& bk = dp_->buckets[b];
      lock.unlock();
      collx_status_t st = collx_wait(bk.request, kWaitSliceMs);
      std::string why;
      if (st != COLLX_IN_PROGRESS) {
        collx_request_free(bk.request);
        bk.request = nullptr;
        if (st != COLLX_OK)
          why = "bucket " + std::to_string(b) + " failed: " + comm_error(dp_->comm, st);
        else if ((st = dp_complete_bucket(dp_, bk, &why)) != COLLX_OK)
          why = "bucket " + std::to_string(b) + ": " + why;
      }
      lock.lock();
      if (st == COLLX_IN_PROGRESS) continue;
      flight_.pop_front();
      if (st != COLLX_OK) record_error(st, b, why);
      done_.notify_all();
      continue;
    }
    if (stop_) return;
    work_.wait_for(lock, kIdleRecheck);
  }
}

}  // namespace parallel
}  // namespace collx
