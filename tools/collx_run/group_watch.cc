#include "tools/collx_run/group_watch.h"

#include <unistd.h>

namespace collx_run {

namespace {
// How long one wait on the "failed" key lasts: bounds how late stop() returns and how often
// the heartbeat is written.
constexpr int64_t kWatchSliceMs = 500;
}  // namespace

GroupWatch::GroupWatch(collx::Store* store, const AttemptPlan& plan, int64_t heartbeat_timeout_ms, int wake_fd)
    : store_(store), plan_(plan), heartbeat_timeout_ms_(heartbeat_timeout_ms), wake_fd_(wake_fd) {}

void GroupWatch::start() {
  const auto now = std::chrono::steady_clock::now();
  peer_beats_.assign(static_cast<size_t>(plan_.nnodes), -1);
  peer_seen_.assign(static_cast<size_t>(plan_.nnodes), now);
  thread_ = std::thread([this] { run(); });
}

void GroupWatch::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool GroupWatch::failed(std::string* value) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_value_.empty()) return false;
  *value = failed_value_;
  return true;
}

std::string GroupWatch::lost() {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

void GroupWatch::wake() {
  const char byte = 'w';
  (void)!write(wake_fd_, &byte, 1);
}

void GroupWatch::report_lost(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_.empty()) lost_ = why;
  }
  wake();
}

void GroupWatch::beat_and_check_peers(std::chrono::steady_clock::time_point now) {
  int64_t value = 0;
  collx::Status st = store_->add(plan_.key_prefix + "hb/" + std::to_string(plan_.node_rank), 1, &value);
  for (int node = 0; st.ok() && node < plan_.nnodes; ++node) {
    if (node == plan_.node_rank) continue;
    st = store_->add(plan_.key_prefix + "hb/" + std::to_string(node), 0, &value);  // a read
    if (!st.ok()) break;
    const size_t i = static_cast<size_t>(node);
    if (value != peer_beats_[i]) {
      peer_beats_[i] = value;
      peer_seen_[i] = now;
    } else if (now - peer_seen_[i] > std::chrono::milliseconds(heartbeat_timeout_ms_)) {
      report_lost("the agent of node " + std::to_string(node) + " sent no heartbeat for " +
                  std::to_string(heartbeat_timeout_ms_ / 1000) + " s (--heartbeat-timeout): it died or its host is unreachable");
      return;
    }
  }
  if (st.ok()) {
    st = store_->add(plan_.key_prefix + "ok", 0, &value);
    if (st.ok() && value >= plan_.nnodes && !all_succeeded_.exchange(true)) wake();
  }
  if (!st.ok()) report_lost("the rendezvous store is unreachable (its agent exited?): " + st.message());
}

void GroupWatch::run() {
  const std::string failed_key = plan_.key_prefix + "failed";
  while (!stop_) {
    collx::Status st = store_->wait({failed_key}, collx::Deadline::after_ms(kWatchSliceMs));
    if (st.ok()) {
      collx::Bytes value;
      st = store_->get(failed_key, &value, collx::Deadline::after_ms(kWatchSliceMs));
      if (st.ok()) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          failed_value_.assign(value.begin(), value.end());
        }
        wake();
        return;
      }
    }
    if (st.code() != COLLX_ERR_TIMEOUT) {
      report_lost("the rendezvous store is unreachable (its agent exited?): " + st.message());
      return;
    }
    beat_and_check_peers(std::chrono::steady_clock::now());
    if (!lost().empty()) return;
  }
}

}  // namespace collx_run
