#include "tests/support/process_ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace collx {
namespace testing {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<RankResult> run_processes(int size, int timeout_ms,
                                      const std::function<int(int, int, const std::string&)>& body) {
  const std::string store_addr = "127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids(static_cast<size_t>(size), -1);
  std::vector<RankResult> results(static_cast<size_t>(size));
  const auto start = std::chrono::steady_clock::now();
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = body(r, size, store_addr);
      fflush(stdout);
      fflush(stderr);
      _exit(code);  // skip atexit handlers and gtest's teardown in the child
    }
    pids[static_cast<size_t>(r)] = pid;
  }
  int remaining = size;
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  while (remaining > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < size; ++r) {
        if (pids[static_cast<size_t>(r)] != pid) continue;
        RankResult& res = results[static_cast<size_t>(r)];
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
        pids[static_cast<size_t>(r)] = -1;
        --remaining;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (pids[static_cast<size_t>(r)] > 0) kill(pids[static_cast<size_t>(r)], SIGKILL);
      }
      while (remaining > 0) {
        pid_t done = waitpid(-1, &status, 0);
        if (done <= 0) break;
        for (int r = 0; r < size; ++r) {
          if (pids[static_cast<size_t>(r)] == done) {
            results[static_cast<size_t>(r)].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            results[static_cast<size_t>(r)].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            results[static_cast<size_t>(r)].seconds = timeout_ms / 1000.0;
            pids[static_cast<size_t>(r)] = -1;
            --remaining;
          }
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return results;
}

collx_status_t create_world_comm(int rank, int size, const std::string& store_addr, int64_t comm_timeout_ms,
                                 uint32_t transports, collx_comm_t* out) {
  collx_config_t config;
  collx_config_init(&config, sizeof config);
  config.rank = rank;
  config.world_size = size;
  config.store_addr = store_addr.c_str();
  config.timeout_ms = comm_timeout_ms;
  config.transports = transports;
  return collx_comm_create(&config, out);
}

std::vector<RankResult> run_comm_processes(int size, int timeout_ms,
                                           const std::function<int(int, int, collx_comm_t)>& body,
                                           int64_t comm_timeout_ms, uint32_t transports) {
  return run_processes(size, timeout_ms, [&](int rank, int world, const std::string& addr) {
    collx_comm_t comm = nullptr;
    collx_status_t rc = create_world_comm(rank, world, addr, comm_timeout_ms, transports, &comm);
    if (rc != COLLX_OK) {
      fprintf(stderr, "rank %d: comm_create: %s: %s\n", rank, collx_status_name(rc), collx_last_error(nullptr));
      return 100;
    }
    int code = body(rank, world, comm);
    collx_comm_destroy(comm);
    return code;
  });
}

std::string describe(const std::vector<RankResult>& results) {
  std::string out;
  for (size_t r = 0; r < results.size(); ++r) {
    char line[128];
    snprintf(line, sizeof line, "rank %zu: exit %d signal %d after %.2fs\n", r, results[r].exit_code,
             results[r].signal, results[r].seconds);
    out += line;
  }
  return out;
}

}  // namespace testing
}  // namespace collx
