// Failures between real processes: a rank killed mid all-reduce, a mismatched call, a store
// that is not there, and garbage bytes on the store and transport ports.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/killed_rank.h"
#include "tests/support/process_ranks.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

class KilledRank : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(KilledRank, EverySurvivorGetsARemoteErrorNamingItWithinTwoSeconds) {
  expect_survivors_see_killed_rank(GetParam().mask, COLLX_ALGO_AUTO);
}

// The survivors wait on the dead rank's shared board, not on a message from it.
TEST(KilledRankInSharedMemory, EverySurvivorOfASharedMemoryAllreduceGetsARemoteErrorWithinTwoSeconds) {
  expect_survivors_see_killed_rank(COLLX_TRANSPORT_SHM, COLLX_ALGO_SHARED_MEMORY);
}

TEST(KilledRankInSharedMemory, EverySurvivorReadingItsZeroCopyBufferGetsARemoteErrorWithinTwoSeconds) {
  expect_survivors_see_killed_rank(COLLX_TRANSPORT_SHM, COLLX_ALGO_SHARED_MEMORY, /*zero_copy=*/true);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, KilledRank, ::testing::ValuesIn(transports_under_test()), TransportName());

TEST(Mismatch, DifferentDatatypesBetweenProcessesFailBothWithMismatch) {
  auto results = run_comm_processes(2, 30000, [](int rank, int, collx_comm_t comm) {
    std::vector<double> buf(64, 1.0);
    collx_status_t rc = collx_allreduce(buf.data(), buf.data(), 16, rank == 0 ? COLLX_FLOAT32 : COLLX_FLOAT64,
                                        COLLX_SUM, comm, nullptr);
    std::string msg = collx_last_error(comm);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_MISMATCH, "got %s: %s", collx_status_name(rc), msg.c_str());
    COLLX_CHILD_CHECK(msg.find("float32") != std::string::npos && msg.find("float64") != std::string::npos,
                      "message does not name both calls: %s", msg.c_str());
    return 0;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

TEST(Bootstrap, AStoreThatIsNotThereTimesOutNamingTheAddress) {
  const int port = free_port();  // nobody listens here
  auto results = run_processes(1, 20000, [port](int, int, const std::string&) {
    collx_config_t config;
    collx_config_init(&config, sizeof config);
    config.rank = 1;  // not rank 0, so it does not host the store itself
    config.world_size = 2;
    std::string addr = "127.0.0.1:" + std::to_string(port);
    config.store_addr = addr.c_str();
    config.timeout_ms = 500;
    collx_comm_t comm = nullptr;
    auto start = std::chrono::steady_clock::now();
    collx_status_t rc = collx_comm_create(&config, &comm);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string msg = collx_last_error(nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_TIMEOUT, "got %s: %s", collx_status_name(rc), msg.c_str());
    COLLX_CHILD_CHECK(msg.find(addr) != std::string::npos, "message does not name %s: %s", addr.c_str(), msg.c_str());
    COLLX_CHILD_CHECK(seconds < 3.0, "took %.2f s", seconds);
    COLLX_CHILD_CHECK(comm == nullptr, "comm set on failure");
    return 0;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

// TCP ports a process listens on (from /proc/net/tcp and its open sockets).
std::set<int> listening_ports_of(pid_t pid) {
  std::set<std::string> inodes;
  std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* dir = opendir(fd_dir.c_str())) {
    while (dirent* entry = readdir(dir)) {
      char target[128] = {0};
      std::string path = fd_dir + "/" + entry->d_name;
      if (readlink(path.c_str(), target, sizeof target - 1) > 0 && std::strncmp(target, "socket:[", 8) == 0) {
        inodes.insert(std::string(target + 8, std::strlen(target) - 9));
      }
    }
    closedir(dir);
  }
  std::set<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
    in >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (state == "0A" && inodes.count(inode)) ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
  }
  return ports;
}

void send_garbage(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  close(fd);
}

TEST(Garbage, BytesOnTheStoreAndTransportPortsAreDroppedAndTheJobContinues) {
  struct Shared {
    pid_t pids[2];
    int garbage_sent;
    int ports_hit;
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  std::memset(shared, 0, sizeof *shared);
  // Over TCP: the transport listens on ports of its own (shm and ucx here do not).
  auto results = run_comm_processes(2, 60000, [shared](int rank, int, collx_comm_t comm) {
    shared->pids[rank] = getpid();
    float x = 1, y = 0;
    collx_status_t rc = collx_allreduce(&x, &y, 1, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_OK && y == 2.0f, "first allreduce: %s", collx_last_error(comm));
    if (rank == 0) {
      // Hit every port either rank listens on (the store and both transports) with junk.
      std::string junk;
      for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 131 + 7) & 0xff);
      std::string huge_length = std::string("CLXS") + std::string(8, '\xff') + junk.substr(0, 64);
      std::set<int> ports = listening_ports_of(shared->pids[0]);
      for (int p : listening_ports_of(shared->pids[1])) ports.insert(p);
      for (int port : ports) {
        send_garbage(port, junk);
        send_garbage(port, huge_length);
        send_garbage(port, "");
      }
      shared->ports_hit = static_cast<int>(ports.size());
      shared->garbage_sent = 1;
    }
    rc = collx_barrier(comm, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "barrier: %s", collx_last_error(comm));
    for (int i = 0; i < 20; ++i) {
      std::vector<double> v(100000, rank + 1.0);
      rc = collx_allreduce(v.data(), v.data(), v.size(), COLLX_FLOAT64, COLLX_SUM, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK && v[99999] == 3.0, "allreduce after garbage: %s", collx_last_error(comm));
    }
    return 0;
  }, /*comm_timeout_ms=*/30000, COLLX_TRANSPORT_TCP);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_EQ(shared->garbage_sent, 1);
  EXPECT_GE(shared->ports_hit, 3) << "expected the store port and a transport port per rank";
  munmap(shared, sizeof *shared);
}

}  // namespace
}  // namespace testing
}  // namespace collx
