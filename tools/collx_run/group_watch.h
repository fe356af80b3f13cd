// The background half of an agent during one attempt: waits on the attempt's "failed" key in
// deadline-bounded slices (the store server wakes the wait when the key appears, so this is
// no busy loop), beats this agent's heartbeat, and notices a peer agent that went silent or a
// rendezvous store that vanished. It reports through flags and a byte on the agent's wake pipe.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "lib/store/store.h"
#include "tools/collx_run/rendezvous.h"

namespace collx_run {

class GroupWatch {
 public:
  GroupWatch(collx::Store* store, const AttemptPlan& plan, int64_t heartbeat_timeout_ms, int wake_fd);
  ~GroupWatch() { stop(); }

  void start();
  void stop();

  // The winning "failed" value ("<rank> <status> <restartable>"), once some agent set it.
  bool failed(std::string* value);
  // Why the group cannot go on (a silent peer agent, the store gone); empty while fine.
  std::string lost();
  // Every node reported that all its ranks exited 0.
  bool all_succeeded() const { return all_succeeded_.load(); }

 private:
  void run();
  void beat_and_check_peers(std::chrono::steady_clock::time_point now);
  void report_lost(const std::string& why);
  void wake();

  collx::Store* store_;
  AttemptPlan plan_;
  int64_t heartbeat_timeout_ms_;
  int wake_fd_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> all_succeeded_{false};
  std::mutex mutex_;
  std::string failed_value_;
  std::string lost_;
  std::vector<int64_t> peer_beats_;
  std::vector<std::chrono::steady_clock::time_point> peer_seen_;
};

}  // namespace collx_run
