// The UCX transport with ranks as forked processes (UCX's shared-memory and TCP transports
// between them): sizes both ways, a SIGKILLed peer, an 8-process all-to-all, a peer that
// never connects, and (disabled, run by hand) a bandwidth comparison with collx's TCP
// and shm transports:
//   build-topo/tests/ucx_process_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

#include "transports/ucx/ucx_test_util.h"

namespace collx {
namespace ucx_test {
namespace {

#ifdef COLLX_HAVE_UCX

void sizes_both_ways(bool peer_errors) {
  const std::vector<size_t> sizes = {0, 1, 8192, 8193, (1u << 20) + 3, 64u << 20};
  auto codes = run_proc_job(2, [&](int rank, transport::Transport* t, int64_t*) -> int {
    return shm_test::sizes_both_ways(rank, t, sizes);
  }, peer_errors);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(UcxProcesses, SizesBothWays) { sizes_both_ways(true); }
TEST(UcxProcesses, SizesBothWaysSharedMemory) { sizes_both_ways(false); }

// Rank 2 is SIGKILLed while ranks 0 and 1 wait on it (a receive, and a large send it never
// took): both learn within 2 s, naming rank 2 (by UCX's endpoint error, or by pid when the
// endpoints have no peer error handling).
void sigkilled_peer(bool peer_errors) {
  auto codes = run_proc_job(3, [&](int rank, transport::Transport* t, int64_t* shared) -> int {
    return shm_test::survive_sigkilled_rank2(rank, t, shared, "rank 2");
  }, peer_errors);
  EXPECT_EQ(codes, (std::vector<int>{0, 0, -SIGKILL}));
}

TEST(UcxProcesses, SigkilledPeerReportedWithinTwoSeconds) { sigkilled_peer(true); }
TEST(UcxProcesses, SigkilledPeerReportedWithinTwoSecondsSharedMemory) { sigkilled_peer(false); }

// 8 processes on (at most) 2 cores, every pair both ways, inline and large messages.
TEST(UcxProcesses, AllToAll8Processes) {
  constexpr int kRanks = 8, kRounds = 3;
  auto codes = run_proc_job(kRanks, [](int rank, transport::Transport* t, int64_t*) -> int {
    static const size_t sizes[] = {0, 9, 8192, 8193, 65537, 1u << 20};  // inline and large
    return shm_test::all_to_all_rounds(rank, t, kRanks, kRounds, sizes);
  });
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0));
}

// A bootstrap whose rank stops (SIGSTOP) as soon as the worker addresses are exchanged,
// before it creates a single endpoint; `pid` tells its peer whom to kill.
class StopsAfterAddresses : public transport::Bootstrap {
 public:
  StopsAfterAddresses(transport::Bootstrap* inner, int64_t* pid) : inner_(inner), pid_(pid) {}
  Status allgather(const std::string& name, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline deadline) override {
    Status s = inner_->allgather(name, mine, all, deadline);
    __atomic_store_n(pid_, static_cast<int64_t>(::getpid()), __ATOMIC_RELEASE);
    ::raise(SIGSTOP);
    return s;
  }

 private:
  transport::Bootstrap* inner_;
  int64_t* pid_;
};

// Creation connects every endpoint before it returns (ucx_wireup.cc): a peer that took part
// in the address exchange but never connects fails its peers' creation at their deadline,
// named, instead of leaving a connection half set up for the first collective to trip over.
TEST(UcxProcesses, APeerThatNeverConnectsFailsCreationAtTheDeadlineNamingIt) {
  shm_test::ProcBoard* board = shm_test::new_proc_board();
  auto* pid = static_cast<int64_t*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  *pid = 0;
  const uint64_t comm = next_comm_id();
  auto codes = shm_test::run_processes(2, [&](int rank) -> int {
    shm_test::ProcBootstrap boot(board, rank, 2);
    StopsAfterAddresses stopping(&boot, pid);
    UcxTransportParams params = ucx_params(rank, 2, comm, rank == 1 ? static_cast<transport::Bootstrap*>(&stopping) : &boot);
    params.deadline = Deadline::after_ms(1500);
    TransportPtr t;
    Status s = create_ucx_transport(params, &t);
    while (__atomic_load_n(pid, __ATOMIC_ACQUIRE) == 0) ::usleep(1000);
    ::kill(static_cast<pid_t>(*pid), SIGKILL);
    SHM_CHECK(s.code() == COLLX_ERR_TIMEOUT, "%s: %s", status_name(s.code()), s.message().c_str());
    SHM_CHECK(s.message().find("connecting to rank 1") != std::string::npos, "%s", s.message().c_str());
    return 0;
  });
  ::munmap(board, sizeof(shm_test::ProcBoard));
  ::munmap(pid, 4096);
  EXPECT_EQ(codes, (std::vector<int>{0, -SIGKILL}));
}

// ---- bandwidth against collx's own transports (not an assertion)

using Factory = std::function<Status(int rank, transport::Bootstrap*, uint64_t comm, TransportPtr*)>;

// Rank 0 streams `iters` messages of each size to rank 1, waiting for each; rank 1 answers
// one byte after the last. GB/s = bytes / time at rank 0 (results in shared[size index]).
int bench_body(int rank, transport::Transport* t, int64_t* shared, const std::vector<size_t>& sizes) {
  std::vector<uint8_t> buf(sizes.back(), 1);
  uint8_t ack = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const int iters = static_cast<int>(std::max<size_t>(4, (256u << 20) / sizes[s]));
    int64_t t0 = 0;
    for (int i = -1; i < iters; ++i) {  // one warm-up message
      if (i == 0) t0 = monotonic_us();
      Request r;
      Status st = rank == 0 ? t->post_send(&r, 1, 1, buf.data(), sizes[s], OpDesc{})
                            : t->post_recv(&r, 0, 1, buf.data(), sizes[s], OpDesc{});
      SHM_CHECK(st.ok(), "%s", st.message().c_str());
      st = wait_one(t, &r, 60000);
      SHM_CHECK(st.ok(), "%s", st.message().c_str());
    }
    Request r;
    Status st = rank == 0 ? t->post_recv(&r, 1, 2, &ack, 1, OpDesc{}) : t->post_send(&r, 0, 2, &ack, 1, OpDesc{});
    SHM_CHECK(st.ok() && wait_one(t, &r, 60000).ok(), "ack");
    if (rank == 0) shared[s] = static_cast<int64_t>(static_cast<double>(sizes[s]) * iters / (monotonic_us() - t0) * 1e3);
  }
  t->close(Deadline::after_ms(5000));
  return 0;
}

std::vector<double> bench(const Factory& factory, const std::vector<size_t>& sizes) {
  shm_test::ProcBoard* board = shm_test::new_proc_board();
  auto* shared =
      static_cast<int64_t*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(shared, 0, 4096);
  const uint64_t comm = next_comm_id();
  auto codes = shm_test::run_processes(2, [&](int rank) -> int {
    shm_test::ProcBootstrap boot(board, rank, 2);
    TransportPtr t;
    Status s = factory(rank, &boot, comm, &t);
    SHM_CHECK(s.ok(), "%s", s.message().c_str());
    return bench_body(rank, t.get(), shared, sizes);
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  std::vector<double> gbps;
  for (size_t s = 0; s < sizes.size(); ++s) gbps.push_back(shared[s] / 1e6);  // shared: KB/s -> GB/s
  ::munmap(board, sizeof(shm_test::ProcBoard));
  ::munmap(shared, 4096);
  return gbps;
}

// The fields every transport's params share, for a 2-rank job.
template <typename Params>
Params two_rank_params(int rank, transport::Bootstrap* b, uint64_t comm) {
  Params p;
  p.rank = rank;
  p.size = 2;
  p.comm_id = comm;
  p.bootstrap = b;
  p.deadline = Deadline::after_ms(20000);
  return p;
}

TEST(UcxProcesses, DISABLED_BenchVsTcpAndShm) {
  const std::vector<size_t> sizes = {1u << 20, 4u << 20, 16u << 20, 64u << 20};
  std::vector<std::pair<const char*, Factory>> transports = {
      {"ucx", [](int rank, transport::Bootstrap* b, uint64_t comm, TransportPtr* out) {
         return create_ucx_transport(ucx_params(rank, 2, comm, b), out);
       }},
      {"ucx-sm", [](int rank, transport::Bootstrap* b, uint64_t comm, TransportPtr* out) {
         ::setenv("COLLX_UCX_PEER_ERRORS", "0", 1);  // in the child: UCX may use shared memory
         return create_ucx_transport(ucx_params(rank, 2, comm, b), out);
       }},
      {"tcp", [](int rank, transport::Bootstrap* b, uint64_t comm, TransportPtr* out) {
         auto p = two_rank_params<TcpTransportParams>(rank, b, comm);
         COLLX_RETURN_IF_ERROR(load_tcp_settings(&p));
         std::unique_ptr<TcpTransport> t;
         COLLX_RETURN_IF_ERROR(create_tcp_transport(p, &t));
         *out = std::move(t);
         return Status::Ok();
       }},
      {"shm", [](int rank, transport::Bootstrap* b, uint64_t comm, TransportPtr* out) {
         return create_shm_transport(two_rank_params<ShmTransportParams>(rank, b, comm), out);
       }},
  };
  std::printf("p2p bandwidth, 2 processes, GB/s (1e9 B/s)\n%-6s", "bytes");
  for (size_t s : sizes) std::printf(" %9zuM", s >> 20);
  std::printf("\n");
  for (auto& [name, factory] : transports) {
    std::vector<double> gbps = bench(factory, sizes);
    std::printf("%-6s", name);
    for (double g : gbps) std::printf(" %10.2f", g);
    std::printf("\n");
  }
}

#endif  // COLLX_HAVE_UCX

}  // namespace
}  // namespace ucx_test
}  // namespace collx
