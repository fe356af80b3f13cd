#include "tools/collx_run/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tools/collx_run/group_watch.h"
#include "tools/collx_run/rank_env.h"
#include "tools/collx_run/rank_group.h"
#include "tools/collx_run/rendezvous.h"

namespace collx_run {

namespace {

// The self-pipe: signal handlers and the watch thread write a byte, the main loop polls it.
int g_wake[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_ranks_running = 0;

void on_signal(int signo) {
  if (signo != SIGCHLD) {
    // Outside an attempt (rendezvous, restart) there is nothing to forward: leave now.
    if (!g_ranks_running) _exit(128 + signo);
    g_signal = signo;
  }
  const int saved = errno;
  const char byte = 's';
  (void)!write(g_wake[1], &byte, 1);
  errno = saved;
}

bool install_signal_handling() {
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return true;
}

void drain_wake_pipe() {
  char buf[256];
  while (read(g_wake[0], buf, sizeof buf) > 0) {
  }
}

void say(const char* format, const std::string& a, const std::string& b = std::string()) {
  std::fprintf(stderr, "collx-run: ");
  std::fprintf(stderr, format, a.c_str(), b.c_str());
  std::fprintf(stderr, "\n");
}

enum class Outcome { kSucceeded, kFailed, kLost };

struct AttemptResult {
  Outcome outcome = Outcome::kFailed;
  int exit_status = 1;
  bool restartable = false;
  std::string why;
};

// "<rank> <status> <restartable>" as published under the attempt's "failed" key.
AttemptResult parse_failure(const std::string& value) {
  AttemptResult r;
  int rank = -1, restartable = 0;
  std::istringstream in(value);
  in >> rank >> r.exit_status >> restartable;
  r.restartable = restartable != 0;
  r.why = rank >= 0 ? "rank " + std::to_string(rank) + " exited with status " + std::to_string(r.exit_status)
                    : "an agent was stopped by signal " + std::to_string(r.exit_status - 128);
  return r;
}

class Attempt {
 public:
  Attempt(const RunOptions& options, Rendezvous* rdzv, const AttemptPlan& plan)
      : options_(options), rdzv_(rdzv), plan_(plan),
        watch_(rdzv->watch_store(), plan, options.heartbeat_timeout_ms, g_wake[1]) {}

  AttemptResult run() {
    g_ranks_running = 1;
    if (g_signal) return stopped_by_signal();
    collx::Status st = group_.start(options_.program, rank_specs(plan_, options_));
    if (!st.ok()) {
      group_.signal_all(SIGKILL);
      publish_failure(-1, 1, false);
      result_ = {Outcome::kLost, 1, false, "cannot start the ranks: " + st.message()};
      stop_group();
    }
    watch_.start();
    while (!finished()) {
      group_.pump_output(g_wake[0], 500);
      drain_wake_pipe();
      step();
    }
    group_.flush_output();
    watch_.stop();
    g_ranks_running = 0;
    return result_;
  }

 private:
  // One pass of the main loop: react to signals, ended ranks and the watch.
  void step() {
    if (g_signal && !signalled_) {
      signalled_ = true;
      group_.signal_all(g_signal);  // forwarded as is; SIGKILL follows after the grace
      publish_failure(-1, 128 + g_signal, false);
      if (!stopping_) result_ = {Outcome::kFailed, 128 + g_signal, false, "stopped by signal " + std::to_string(g_signal)};
      stop_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.stop_grace_ms);
      stopping_ = true;
    }
    for (const auto& ended : group_.reap()) {
      if (ended.second != 0 && !stopping_) {
        result_ = publish_failure(ended.first, ended.second, true);
        stop_group();
      }
    }
    std::string failure;
    if (!stopping_ && watch_.failed(&failure)) {
      result_ = parse_failure(failure);
      stop_group();
    }
    if (group_.all_exited() && !stopping_ && !reported_ok_) {
      reported_ok_ = true;
      int64_t ignored = 0;
      if (!rdzv_->store()->add(plan_.key_prefix + "ok", 1, &ignored).ok()) lose("cannot report success to the store");
    }
    if (!stopping_ && !(reported_ok_ && watch_.all_succeeded())) {
      const std::string lost = watch_.lost();
      if (!lost.empty()) lose(lost);
    }
    if (stopping_ && !killed_ && std::chrono::steady_clock::now() >= stop_deadline_) {
      killed_ = true;
      group_.signal_all(SIGKILL);
    }
  }

  bool finished() {
    if (!group_.all_exited()) return false;
    if (stopping_) return true;
    if (reported_ok_ && watch_.all_succeeded()) {
      result_ = {Outcome::kSucceeded, 0, false, ""};
      return true;
    }
    return false;
  }

  // The first failure wins: compare_set publishes ours only when no agent published one.
  AttemptResult publish_failure(int rank, int status, bool restartable) {
    std::string mine = std::to_string(rank) + " " + std::to_string(status) + " " + (restartable ? "1" : "0");
    collx::Bytes current;
    collx::Status st = rdzv_->store()->compare_set(plan_.key_prefix + "failed", {}, collx::Bytes(mine.begin(), mine.end()),
                                                   &current);
    if (st.ok() && !current.empty()) mine.assign(current.begin(), current.end());
    return parse_failure(mine);
  }

  void lose(const std::string& why) {
    result_ = {Outcome::kLost, 1, false, why};
    publish_failure(-1, 1, false);
    stop_group();
  }

  void stop_group() {
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.stop_grace_ms);
    group_.signal_all(SIGTERM);
  }

  AttemptResult stopped_by_signal() {
    g_ranks_running = 0;
    return {Outcome::kFailed, 128 + g_signal, false, "stopped by signal " + std::to_string(g_signal)};
  }

  const RunOptions& options_;
  Rendezvous* rdzv_;
  AttemptPlan plan_;
  RankGroup group_;
  GroupWatch watch_;
  AttemptResult result_;
  bool stopping_ = false;
  bool signalled_ = false;
  bool killed_ = false;
  bool reported_ok_ = false;
  std::chrono::steady_clock::time_point stop_deadline_;
};

// The leader's store must outlive every agent's last read: each agent marks itself out and
// the leader waits for all marks (bounded by the heartbeat timeout: a vanished agent never
// marks).
void exit_barrier(Rendezvous* rdzv, const AttemptPlan& plan, int64_t timeout_ms) {
  const std::string base = plan.key_prefix + "exit/";
  if (!rdzv->store()->set(base + std::to_string(plan.node_rank), collx::Bytes{'1'}).ok() || !rdzv->leader()) return;
  std::vector<std::string> keys;
  for (int node = 0; node < plan.nnodes; ++node) keys.push_back(base + std::to_string(node));
  rdzv->store()->wait(keys, collx::Deadline::after_ms(timeout_ms)).ignore();
}

}  // namespace

int run_agent(const RunOptions& options) {
  if (!install_signal_handling()) {
    std::perror("collx-run: pipe");
    return 1;
  }
  Rendezvous rdzv;
  collx::Status st = rdzv.open(options);
  if (!st.ok()) {
    say("%s", st.message());
    return 1;
  }
  for (int attempt = 0;; ++attempt) {
    AttemptPlan plan;
    st = rdzv.join(attempt, &plan);
    if (!st.ok()) {
      say("%s", st.message());
      return 1;
    }
    AttemptResult result = Attempt(options, &rdzv, plan).run();
    if (result.outcome == Outcome::kSucceeded) {
      exit_barrier(&rdzv, plan, options.heartbeat_timeout_ms);
      return 0;
    }
    if (result.restartable && attempt < options.max_restarts) {
      say("attempt %s failed (%s); restarting the group", std::to_string(attempt), result.why);
      continue;
    }
    say("job failed: %s%s", result.why,
        result.restartable ? " (no restarts left, --max-restarts " + std::to_string(options.max_restarts) + ")" : "");
    exit_barrier(&rdzv, plan, options.heartbeat_timeout_ms);
    return result.exit_status;
  }
}

}  // namespace collx_run
