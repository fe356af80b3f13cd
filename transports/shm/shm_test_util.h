// Test helpers for the shm transport: ranks as threads (in-memory bootstrap) or as forked
// processes (bootstrap over a shared anonymous mapping), and small checking utilities.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/board_bootstrap.h"
#include "transports/conformance/transport_test_util.h"
#include "transports/shm/shm_transport.h"

namespace collx {
namespace shm_test {

using transport::OpDesc;
using transport::Request;

using testing::Board;
using testing::BoardBootstrap;

// ---- ranks as processes: allgathers in call order, over a MAP_SHARED|MAP_ANONYMOUS page set
// created before fork.
constexpr int kProcMaxRanks = 16, kProcRounds = 8, kProcBlob = 512;
struct ProcBoard {
  std::atomic<int> arrived[kProcRounds];
  uint32_t len[kProcRounds][kProcMaxRanks];
  uint8_t data[kProcRounds][kProcMaxRanks][kProcBlob];
};

inline ProcBoard* new_proc_board() {
  void* p = ::mmap(nullptr, sizeof(ProcBoard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  std::memset(p, 0, sizeof(ProcBoard));
  return static_cast<ProcBoard*>(p);
}

class ProcBootstrap : public transport::Bootstrap {
 public:
  ProcBootstrap(ProcBoard* board, int rank, int size) : b_(board), rank_(rank), size_(size) {}
  Status allgather(const std::string&, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline deadline) override {
    if (round_ >= kProcRounds || mine.size() > kProcBlob) return make_status(COLLX_ERR_INTERNAL, "proc bootstrap full");
    int r = round_++;
    std::memcpy(b_->data[r][rank_], mine.data(), mine.size());
    b_->len[r][rank_] = static_cast<uint32_t>(mine.size());
    b_->arrived[r].fetch_add(1);
    while (b_->arrived[r].load() < size_) {
      if (deadline.expired()) return make_status(COLLX_ERR_TIMEOUT, "proc bootstrap timed out");
      ::usleep(500);
    }
    all->assign(size_, {});
    for (int i = 0; i < size_; ++i) (*all)[i].assign(b_->data[r][i], b_->data[r][i] + b_->len[r][i]);
    return Status::Ok();
  }

 private:
  ProcBoard* b_;
  int rank_, size_;
  int round_ = 0;
};

// Runs fn(rank) in `size` forked children; returns their exit codes (-signal when killed).
inline std::vector<int> run_processes(int size, const std::function<int(int)>& fn) {
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = fn(r);
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  return codes;
}

// In children: fail loudly with a line, exit code 1 (gtest assertions do not cross fork).
#define SHM_CHECK(cond, ...)                                                    \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fprintf(stderr, "\n");                                               \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

// ---- common (transport-neutral helpers live in transports/conformance/transport_test_util.h)
using transport_test::describe_op;
using transport_test::fill;
using transport_test::first_bad;
using transport_test::next_comm_id;
using transport_test::pattern;
using transport_test::wait_one;

inline ShmTransportParams make_params(int rank, int size, uint64_t comm_id, transport::Bootstrap* bootstrap) {
  return transport_test::job_params<ShmTransportParams>(rank, size, comm_id, bootstrap);
}

// In a child of a 3-rank job: rank 2 SIGKILLs itself 250 ms in (not a multiple of the
// 100 ms liveness periods; the time in shared[0]) while rank 0 waits on a receive from it
// and rank 1 on a 1 MiB send it never takes; both must fail within 2 s with
// COLLX_ERR_REMOTE containing `expected`, then stay a while (the other survivor must find
// out by itself). 0, or 1 with a line on stderr.
inline int survive_sigkilled_rank2(int rank, transport::Transport* t, int64_t* shared, const char* expected) {
  if (rank == 2) {
    ::usleep(250 * 1000);
    shared[0] = monotonic_us();
    ::raise(SIGKILL);
  }
  std::vector<uint8_t> buf(1 << 20);
  transport::Request r;
  if (rank == 0) {
    SHM_CHECK(t->post_recv(&r, 2, 1, buf.data(), 4, transport::OpDesc{}).ok(), "post_recv");
  } else {
    SHM_CHECK(t->post_send(&r, 2, 1, buf.data(), buf.size(), transport::OpDesc{}).ok(), "post_send");
  }
  Status s = wait_one(t, &r, 20000);
  const int64_t waited_ms = (monotonic_us() - shared[0]) / 1000;
  SHM_CHECK(s.code() == COLLX_ERR_REMOTE, "%s", s.message().c_str());
  SHM_CHECK(s.message().find(expected) != std::string::npos, "%s", s.message().c_str());
  SHM_CHECK(waited_ms < 2000, "noticed after %lld ms", static_cast<long long>(waited_ms));
  std::printf("rank %d: '%s' after %lld ms\n", rank, s.message().c_str(), static_cast<long long>(waited_ms));
  ::usleep(300 * 1000);
  return 0;
}

// In a child of a 2-rank job: each size from 0 to 1, then from 1 to 0 (tag 7), checking
// every byte; then close. 0, or 1 with a line on stderr. Shared by the shm and ucx tests.
inline int sizes_both_ways(int rank, transport::Transport* t, const std::vector<size_t>& sizes) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int dir = 0; dir < 2; ++dir) {  // 0 -> 1, then 1 -> 0
      std::vector<uint8_t> buf(sizes[i]);
      transport::Request req;
      const bool sender = rank == dir;
      if (sender) {
        fill(buf, i + dir * 100);
        SHM_CHECK(t->post_send(&req, 1 - rank, 7, buf.data(), buf.size(), transport::OpDesc{}).ok(), "post_send");
      } else {
        SHM_CHECK(t->post_recv(&req, 1 - rank, 7, buf.data(), buf.size(), transport::OpDesc{}).ok(), "post_recv");
      }
      Status s = wait_one(t, &req);
      SHM_CHECK(s.ok(), "size %zu: %s", sizes[i], s.message().c_str());
      if (!sender) {
        SHM_CHECK(first_bad(buf, i + dir * 100) == -1, "size %zu: bad byte %lld", sizes[i], first_bad(buf, i + dir * 100));
      }
    }
  }
  t->close(Deadline::after_ms(5000));
  return 0;
}

// In a child: `rounds` rounds in which every rank sends to and receives from every other
// (sizes[(src * 5 + dst + round) % 6] bytes, tag = round), checking every byte; then close.
// 0, or 1 with a line on stderr. Shared by the shm and ucx process tests.
inline int all_to_all_rounds(int rank, transport::Transport* t, int ranks, int rounds, const size_t (&sizes)[6]) {
  for (int round = 0; round < rounds; ++round) {
    auto size_for = [&](int src, int dst) { return sizes[(src * 5 + dst + round) % 6]; };
    std::vector<std::vector<uint8_t>> out(ranks), in(ranks);
    std::vector<transport::Request> sreq(ranks), rreq(ranks);
    std::vector<transport::Request*> ptrs;
    for (int k = 1; k < ranks; ++k) {
      int p = (rank + k) % ranks;
      out[p].resize(size_for(rank, p));
      fill(out[p], rank * 100 + p + round * 10000);
      SHM_CHECK(t->post_send(&sreq[p], p, round, out[p].data(), out[p].size(), transport::OpDesc{}).ok(), "send");
      ptrs.push_back(&sreq[p]);
    }
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      in[p].resize(size_for(p, rank));
      SHM_CHECK(t->post_recv(&rreq[p], p, round, in[p].data(), in[p].size(), transport::OpDesc{}).ok(), "recv");
      ptrs.push_back(&rreq[p]);
    }
    Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(30000));
    SHM_CHECK(s.ok(), "round %d: %s", round, s.message().c_str());
    for (int p = 0; p < ranks; ++p) {
      if (p != rank) SHM_CHECK(first_bad(in[p], p * 100 + rank + round * 10000) == -1, "%d -> %d", p, rank);
    }
  }
  t->close(Deadline::after_ms(5000));
  return 0;
}

// Entries of /dev/shm that belong to comm_id (any rank, any pid).
inline std::vector<std::string> shm_leftovers(uint64_t comm_id) {
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "collx-%016llx-", static_cast<unsigned long long>(comm_id));
  std::vector<std::string> found;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) found.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return found;
}

}  // namespace shm_test
}  // namespace collx
