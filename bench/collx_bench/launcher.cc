#include "bench/collx_bench/launcher.h"

#include <arpa/inet.h>
#include <sched.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace collx_bench {

namespace {

// Children as seen by the signal handler: a fixed array filled before the handler can
// run, and a count that only grows, so the handler never reads half-built state.
pid_t* g_children = nullptr;
volatile sig_atomic_t g_num_children = 0;

void forward_signal(int sig) {
  const int saved = errno;
  for (sig_atomic_t i = 0; i < g_num_children; ++i) {
    if (g_children[i] > 0) kill(g_children[i], sig);
  }
  errno = saved;
}

void install_forwarding() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR and the loop re-checks
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int online_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

[[noreturn]] void exec_rank(int rank, int np, const std::string& store_addr, pid_t parent, char** argv) {
  // Die with the parent, so a killed launcher does not leave ranks waiting on peers.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  const std::string r = std::to_string(rank), n = std::to_string(np);
  setenv("COLLX_RANK", r.c_str(), 1);
  setenv("COLLX_WORLD_SIZE", n.c_str(), 1);
  setenv("COLLX_LOCAL_RANK", r.c_str(), 1);
  setenv("COLLX_LOCAL_WORLD_SIZE", n.c_str(), 1);
  setenv("COLLX_STORE_ADDR", store_addr.c_str(), 1);
  // As mpirun does, pin each local rank to a core of its own when they fit: a rank the
  // scheduler moves or preempts stalls every collective for a time slice (measured here
  // under load: 8-byte all-reduce 4-7 us unpinned, 1.2-1.4 us pinned). COLLX_BIND=none (or
  // any other value) in the environment wins.
  if (std::getenv("COLLX_BIND") == nullptr && np <= online_cpus()) setenv("COLLX_BIND", "core", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "collx-bench: rank %d: cannot exec /proc/self/exe: %s\n", rank, std::strerror(errno));
  _exit(127);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

int pick_free_port(std::string* error) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  struct sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = std::string("bind 127.0.0.1:0: ") + std::strerror(errno);
  } else if (getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0) {
    *error = std::string("getsockname: ") + std::strerror(errno);
  } else {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

int spawn_local_ranks(int np, char** argv) {
  std::string error;
  const int port = pick_free_port(&error);
  if (port < 0) {
    std::fprintf(stderr, "collx-bench: cannot pick a port for the store: %s\n", error.c_str());
    return 1;
  }
  const std::string store_addr = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> children(static_cast<size_t>(np), -1);
  g_children = children.data();
  g_num_children = 0;
  install_forwarding();
  std::fflush(nullptr);  // nothing buffered may be written twice by the children
  const pid_t self = getpid();
  for (int r = 0; r < np; ++r) {
    const pid_t pid = fork();
    if (pid == 0) exec_rank(r, np, store_addr, self, argv);
    if (pid < 0) {
      std::fprintf(stderr, "collx-bench: fork for rank %d failed: %s\n", r, std::strerror(errno));
      forward_signal(SIGTERM);
      np = r;  // wait for the ones already started
      break;
    }
    children[static_cast<size_t>(r)] = pid;
    g_num_children = r + 1;
  }
  const bool spawn_failed = g_num_children < static_cast<sig_atomic_t>(children.size());

  using Clock = std::chrono::steady_clock;
  const Clock::time_point never = Clock::time_point::max();
  int remaining = g_num_children;
  int result = spawn_failed ? kExitFailure : 0;
  bool failed = spawn_failed;
  // After a failure: first a short wait, since the others usually fail the same way (or
  // see the peer leave) and report it themselves; then SIGTERM; then SIGKILL.
  Clock::time_point term_at = never, kill_at = never;
  auto signal_children = [&](int sig) {
    for (pid_t c : children) {
      if (c > 0) kill(c, sig);
    }
  };
  while (remaining > 0) {
    int status = 0;
    // Block while all is well; poll once a failure started the grace periods.
    const bool polling = term_at != never || kill_at != never;
    const pid_t pid = waitpid(-1, &status, polling ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: nothing left to wait for
    }
    if (pid == 0) {
      const Clock::time_point now = Clock::now();
      if (now >= term_at) {
        signal_children(SIGTERM);
        term_at = never;
        kill_at = now + std::chrono::seconds(5);
      } else if (now >= kill_at) {
        signal_children(SIGKILL);
        kill_at = never;
      } else {
        sleep_ms(20);
      }
      continue;
    }
    int rank = -1;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i] == pid) {
        rank = static_cast<int>(i);
        children[i] = -1;  // never signal a reaped pid again
      }
    }
    if (rank < 0) continue;
    --remaining;
    const int code = exit_code_of(status);
    if (code == 0) continue;
    if (result == 0) result = code;
    // 1 (wrong results) and 2 (bad arguments) are verdicts every rank reaches together at
    // the end of an orderly run: the others are finishing too and need no stopping.
    if (code == kExitWrongResults || code == kExitUsage || failed) continue;
    failed = true;
    result = code;
    if (remaining > 0) {
      std::fprintf(stderr, "collx-bench: rank %d %s; stopping the other %d rank(s)\n", rank,
                   describe_status(status).c_str(), remaining);
      term_at = Clock::now() + std::chrono::seconds(2);
    } else {
      std::fprintf(stderr, "collx-bench: rank %d %s\n", rank, describe_status(status).c_str());
    }
  }
  g_num_children = 0;
  return result == 0 && failed ? kExitFailure : result;
}

}  // namespace collx_bench
