#include "tools/collx_run/rank_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace collx_run {

namespace {

constexpr size_t kMaxLineBytes = 64 << 10;  // a longer "line" goes out in pieces of this size

// Writes all of `text` with as few write() calls as the kernel allows (one for a line
// under PIPE_BUF), so lines of different ranks never interleave.
void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone: nothing sensible left to do with output
    done += static_cast<size_t>(n);
  }
}

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_rank(char* const* argv, char* const* envp, int out_fd, int err_fd, pid_t agent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != agent) _exit(127);  // the agent died before prctl took effect
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(s, SIG_DFL);
  execvpe(argv[0], argv, envp);
  const char* msg = "collx-run: cannot execute the program: ";
  (void)!write(2, msg, strlen(msg));
  const char* why = strerror(errno);
  (void)!write(2, why, strlen(why));
  (void)!write(2, "\n", 1);
  _exit(127);
}

// The agent's environment with the rank's variables replacing any of the same name.
std::vector<std::string> rank_environment(const RankSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = strchr(*e, '=');
    const std::string name(*e, eq ? static_cast<size_t>(eq - *e) : strlen(*e));
    bool replaced = false;
    for (const auto& kv : spec.env) replaced = replaced || kv.first == name;
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& kv : spec.env) env.push_back(kv.first + "=" + kv.second);
  return env;
}

}  // namespace

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

RankGroup::~RankGroup() {
  signal_all(SIGKILL);
  for (Child& c : children_) {
    if (!c.exited) waitpid(c.pid, nullptr, 0);
  }
  for (Stream& s : streams_) {
    if (s.fd >= 0) close(s.fd);
  }
}

collx::Status RankGroup::start(const std::vector<std::string>& program, const std::vector<RankSpec>& ranks) {
  std::vector<char*> argv;
  for (const std::string& a : program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  fflush(nullptr);
  for (const RankSpec& spec : ranks) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return collx::system_error("pipe", errno);
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      return collx::system_error("pipe", errno);
    }
    // Built before fork: only async-signal-safe calls may run in the child.
    const std::vector<std::string> env = rank_environment(spec);
    std::vector<char*> envp;
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const pid_t agent = getpid();
    const pid_t pid = fork();
    if (pid == 0) exec_rank(argv.data(), envp.data(), out[1], err[1], agent);
    const int fork_errno = errno;
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
      close(out[0]);
      close(err[0]);
      return collx::system_error("fork", fork_errno);
    }
    setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
    children_.push_back({pid, spec.rank, false});
    streams_.push_back({out[0], spec.rank, 1, {}});
    streams_.push_back({err[0], spec.rank, 2, {}});
  }
  return collx::Status::Ok();
}

void RankGroup::emit_lines(Stream* s, bool flush_partial) {
  const std::string prefix = "[" + std::to_string(s->rank) + "] ";
  size_t start = 0;
  for (;;) {
    size_t nl = s->pending.find('\n', start);
    if (nl == std::string::npos && s->pending.size() - start >= kMaxLineBytes) nl = start + kMaxLineBytes - 1;
    if (nl == std::string::npos) break;
    std::string line = prefix + s->pending.substr(start, nl + 1 - start);
    if (line.back() != '\n') line += '\n';
    write_all(s->out_fd, line);
    start = nl + 1;
  }
  s->pending.erase(0, start);
  if (flush_partial && !s->pending.empty()) {
    write_all(s->out_fd, prefix + s->pending + "\n");
    s->pending.clear();
  }
}

void RankGroup::pump_output(int wake_fd, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;
  for (Stream& s : streams_) {
    if (s.fd < 0) continue;
    fds.push_back({s.fd, POLLIN, 0});
    owners.push_back(&s);
  }
  if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  char buf[16384];
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Stream* s = owners[i];
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      emit_lines(s, true);
      close(s->fd);
      s->fd = -1;
      continue;
    }
    s->pending.append(buf, static_cast<size_t>(n));
    emit_lines(s, false);
  }
}

std::vector<std::pair<int, int>> RankGroup::reap() {
  std::vector<std::pair<int, int>> ended;
  for (Child& c : children_) {
    if (c.exited) continue;
    int status = 0;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.exited = true;
    ended.emplace_back(c.rank, exit_status_of(status));
  }
  return ended;
}

void RankGroup::signal_all(int signo) {
  for (const Child& c : children_) {
    if (!c.exited) kill(-c.pid, signo);
  }
}

bool RankGroup::all_exited() const {
  for (const Child& c : children_) {
    if (!c.exited) return false;
  }
  return true;
}

void RankGroup::flush_output() {
  // Output still buffered in the pipes (a rank's children may hold them open: read what is
  // there without waiting for EOF).
  for (Stream& s : streams_) {
    if (s.fd < 0) continue;
    char buf[16384];
    int flags = fcntl(s.fd, F_GETFL);
    fcntl(s.fd, F_SETFL, flags | O_NONBLOCK);
    for (;;) {
      ssize_t n = read(s.fd, buf, sizeof buf);
      if (n <= 0) break;
      s.pending.append(buf, static_cast<size_t>(n));
    }
    emit_lines(&s, true);
    close(s.fd);
    s.fd = -1;
  }
}

}  // namespace collx_run
