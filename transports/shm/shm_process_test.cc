// The shm transport with ranks as forked processes: process_vm_readv rendezvous, the forced
// ring fallback, a SIGKILLed peer, no /dev/shm leftovers, and a bandwidth/latency printout.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm_test {
namespace {

using TransportPtr = std::unique_ptr<transport::Transport>;

// Runs fn(rank, t, shared) in `size` processes with a transport each; returns exit codes.
std::vector<int> run_proc_job(int size, bool force_ring, uint64_t comm,
                              const std::function<int(int, transport::Transport*, int64_t*)>& fn) {
  ProcBoard* board = new_proc_board();
  auto* shared = static_cast<int64_t*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(shared, 0, 4096);
  auto codes = run_processes(size, [&](int rank) -> int {
    ProcBootstrap boot(board, rank, size);
    ShmTransportParams p = make_params(rank, size, comm, &boot);
    p.force_ring_copy = force_ring;
    TransportPtr t;
    Status s = create_shm_transport(p, &t);
    SHM_CHECK(s.ok(), "%s", s.message().c_str());
    return fn(rank, t.get(), shared);
  });
  ::munmap(board, sizeof(ProcBoard));
  ::munmap(shared, 4096);
  return codes;
}

bool cma_permitted() {
  int x = 42, y = 0;
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  iovec l{&y, sizeof y}, r{&x, sizeof x};
  bool ok = ::process_vm_readv(child, &l, 1, &r, 1, 0) == sizeof x && y == 42;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return ok;
}

const std::vector<size_t> kSizes = {0, 1, 1000, (64u << 10) + 1, (1u << 20) + 3, 64u << 20};

int sizes_body(int rank, transport::Transport* t, int64_t*) { return sizes_both_ways(rank, t, kSizes); }

TEST(ShmProcesses, SizesCrossMemoryAttach) {
  if (!cma_permitted()) std::printf("note: process_vm_readv not permitted here: the transport falls back to the ring\n");
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(2, false, comm, sizes_body);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_TRUE(shm_leftovers(comm).empty());
}

TEST(ShmProcesses, SizesForcedRingFallback) {
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(2, true, comm, sizes_body);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// Clears CAP_SYS_PTRACE from this process's effective set (tests run as root here).
bool drop_ptrace_capability() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2];
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
  return ::syscall(SYS_capset, &h, d) == 0;
}

// process_vm_readv really fails with EPERM (sender not dumpable, receiver without
// CAP_SYS_PTRACE): the receiver notices and the data comes through the ring instead.
TEST(ShmProcesses, AutomaticFallbackOnEperm) {
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(2, false, comm, [](int rank, transport::Transport* t, int64_t* shared) -> int {
    if (rank == 1) {
      SHM_CHECK(::prctl(PR_SET_DUMPABLE, 0) == 0, "prctl");
      shared[1] = ::getpid();
    } else {
      SHM_CHECK(drop_ptrace_capability(), "capset");
    }
    Request sync;
    uint8_t b = 0;
    if (rank == 1) {
      SHM_CHECK(t->post_send(&sync, 0, 99, &b, 1, OpDesc{}).ok() && wait_one(t, &sync).ok(), "sync");
    } else {
      SHM_CHECK(t->post_recv(&sync, 1, 99, &b, 1, OpDesc{}).ok() && wait_one(t, &sync).ok(), "sync");
      int x = 0;
      iovec l{&x, sizeof x}, r{&x, sizeof x};  // any address: permission is checked first
      errno = 0;
      SHM_CHECK(::process_vm_readv(static_cast<pid_t>(shared[1]), &l, 1, &r, 1, 0) < 0 && errno == EPERM,
                "process_vm_readv is still permitted (errno %d): the test would not test the fallback", errno);
    }
    for (size_t bytes : {size_t{(64u << 10) + 1}, size_t{(1u << 20) + 3}, size_t{64u << 20}}) {
      std::vector<uint8_t> buf(bytes);
      Request r;
      if (rank == 1) {
        fill(buf, bytes);
        SHM_CHECK(t->post_send(&r, 0, 1, buf.data(), bytes, OpDesc{}).ok(), "post_send");
      } else {
        SHM_CHECK(t->post_recv(&r, 1, 1, buf.data(), bytes, OpDesc{}).ok(), "post_recv");
      }
      Status s = wait_one(t, &r);
      SHM_CHECK(s.ok(), "%zu bytes: %s", bytes, s.message().c_str());
      if (rank == 0) SHM_CHECK(first_bad(buf, bytes) == -1, "%zu bytes: bad byte %lld", bytes, first_bad(buf, bytes));
    }
    t->close(Deadline::after_ms(5000));
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

int64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

// Rank 2 is SIGKILLed while ranks 0 and 1 wait on it (one blocked on a receive, one on a
// rendezvous send it never took): both learn within 2 s, naming rank 2.
TEST(ShmProcesses, SigkilledPeerReportedWithinTwoSeconds) {
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(3, false, comm, [&](int rank, transport::Transport* t, int64_t* shared) -> int {
    SHM_CHECK(shm_leftovers(comm).empty(), "segment still linked after setup");
    return survive_sigkilled_rank2(rank, t, shared, "rank 2 died");
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, -SIGKILL}));
  EXPECT_TRUE(shm_leftovers(comm).empty());
}

// Rank 1 closes: rank 0 gets what it sent and then "rank 1 left".
TEST(ShmProcesses, CloseIsLeftNotDied) {
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(2, false, comm, [](int rank, transport::Transport* t, int64_t*) -> int {
    std::vector<uint8_t> buf(200000);
    Request r;
    if (rank == 1) {
      fill(buf, 9);
      SHM_CHECK(t->post_send(&r, 0, 1, buf.data(), buf.size(), OpDesc{}).ok(), "post_send");
      t->close(Deadline::after_ms(5000));  // flushes: the rendezvous is taken first
      SHM_CHECK(r.done() && !r.failed(), "send not delivered by close");
      return 0;
    }
    ::usleep(100 * 1000);
    SHM_CHECK(t->post_recv(&r, 1, 1, buf.data(), buf.size(), OpDesc{}).ok(), "post_recv");
    Status s = wait_one(t, &r);
    SHM_CHECK(s.ok() && first_bad(buf, 9) == -1, "%s", s.message().c_str());
    Request r2;
    s = t->post_recv(&r2, 1, 1, buf.data(), 4, OpDesc{});
    if (s.ok()) s = wait_one(t, &r2, 5000);
    SHM_CHECK(s.code() == COLLX_ERR_REMOTE && s.message().find("rank 1 left") != std::string::npos, "%s",
              s.message().c_str());
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// 8 processes on (at most) 2 cores, every pair both ways, eager / multi-cell / rendezvous.
TEST(ShmProcesses, AllToAllStress8Processes) {
  constexpr int kRanks = 8, kRounds = 5;
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(kRanks, false, comm, [](int rank, transport::Transport* t, int64_t*) -> int {
    static const size_t sizes[] = {0, 9, 5000, 65536, 65537, 1u << 20};  // eager, multi-cell, rendezvous
    return all_to_all_rounds(rank, t, kRanks, kRounds, sizes);
  });
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0));
  EXPECT_TRUE(shm_leftovers(comm).empty());
}

// Not an assertion: prints 8-byte latency and 64 MiB bandwidth between two processes.
void bench(bool force_ring) {
  uint64_t comm = next_comm_id();
  auto codes = run_proc_job(2, force_ring, comm, [&](int rank, transport::Transport* t, int64_t*) -> int {
    const int peer = 1 - rank;
    uint64_t word = 0;
    constexpr int kPing = 5000;
    int64_t t0 = 0;
    for (int i = -100; i < kPing; ++i) {  // 100 warm-up round trips
      if (i == 0) t0 = now_us();
      Request r;
      if (rank == 0) {
        SHM_CHECK(t->post_send(&r, peer, 1, &word, 8, OpDesc{}).ok(), "send");
        SHM_CHECK(wait_one(t, &r).ok(), "wait");
        SHM_CHECK(t->post_recv(&r, peer, 1, &word, 8, OpDesc{}).ok(), "recv");
        SHM_CHECK(wait_one(t, &r).ok(), "wait");
      } else {
        SHM_CHECK(t->post_recv(&r, peer, 1, &word, 8, OpDesc{}).ok(), "recv");
        SHM_CHECK(wait_one(t, &r).ok(), "wait");
        SHM_CHECK(t->post_send(&r, peer, 1, &word, 8, OpDesc{}).ok(), "send");
        SHM_CHECK(wait_one(t, &r).ok(), "wait");
      }
    }
    double lat_us = static_cast<double>(now_us() - t0) / kPing / 2;
    std::vector<uint8_t> big(64u << 20, 1);
    constexpr int kBw = 10;
    for (int i = -1; i < kBw; ++i) {
      if (i == 0) t0 = now_us();
      Request r;
      if (rank == 0) {
        SHM_CHECK(t->post_send(&r, peer, 2, big.data(), big.size(), OpDesc{}).ok(), "send");
      } else {
        SHM_CHECK(t->post_recv(&r, peer, 2, big.data(), big.size(), OpDesc{}).ok(), "recv");
      }
      SHM_CHECK(wait_one(t, &r).ok(), "wait");
    }
    double secs = static_cast<double>(now_us() - t0) / 1e6;
    if (rank == 1) {
      std::printf("shm %s: 8-byte one-way latency %.2f us; 64 MiB bandwidth %.2f GB/s\n",
                  force_ring ? "ring copy" : "CMA", lat_us, kBw * 64.0 * (1 << 20) / secs / 1e9);
    }
    t->close(Deadline::after_ms(5000));
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(ShmProcesses, BenchCma) { bench(false); }
TEST(ShmProcesses, BenchRingCopy) { bench(true); }

}  // namespace
}  // namespace shm_test
}  // namespace collx
