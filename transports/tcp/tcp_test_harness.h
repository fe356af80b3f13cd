// Test helpers for the TCP transport: ranks as threads in one process, with an in-memory
// bootstrap (a shared board under a mutex) to exchange listen addresses.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/support/board_bootstrap.h"
#include "transports/conformance/transport_test_util.h"
#include "transports/tcp/tcp_transport.h"

namespace collx {
namespace tcp_test {

using transport::OpDesc;
using transport::Request;

using testing::Board;
using testing::BoardBootstrap;

using transport_test::describe_op;
using transport_test::next_comm_id;

// Runs fn(rank) on `size` threads and joins them.
inline void run_ranks(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

struct Cluster {
  std::shared_ptr<Board> board;
  std::vector<std::unique_ptr<BoardBootstrap>> bootstraps;
  std::vector<std::unique_ptr<TcpTransport>> t;
  uint64_t comm_id = 0;
  TcpTransport& operator[](int r) { return *t[r]; }
};

// Creates `size` connected transports (in parallel, as real ranks would). `customize`
// adjusts each rank's parameters.
inline Status make_cluster(int size, Cluster* out,
                           const std::function<void(int, TcpTransportParams&)>& customize = nullptr,
                           int64_t timeout_ms = 10000) {
  out->board = std::make_shared<Board>(size);
  out->comm_id = next_comm_id();
  out->bootstraps.clear();
  out->t.clear();
  out->t.resize(size);
  for (int r = 0; r < size; ++r) out->bootstraps.push_back(std::make_unique<BoardBootstrap>(out->board, r));
  std::vector<Status> statuses(size);
  Deadline deadline = Deadline::after_ms(timeout_ms);
  run_ranks(size, [&](int r) {
    TcpTransportParams params;
    params.rank = r;
    params.size = size;
    params.comm_id = out->comm_id;
    params.bootstrap = out->bootstraps[r].get();
    params.describe = describe_op;
    params.deadline = deadline;
    if (customize) customize(r, params);
    statuses[r] = create_tcp_transport(params, &out->t[r]);
  });
  for (int r = 0; r < size; ++r) {
    if (!statuses[r].ok()) return statuses[r].with_context("rank " + std::to_string(r) + ": ");
  }
  return Status::Ok();
}

// Deterministic content: byte i of message (seed) — catches misplaced and swapped data.
inline void fill_pattern(std::vector<uint8_t>& buf, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= buf.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&buf[i], &x, 8);
  }
  for (; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(x >> (8 * (i % 8))) ^ 0x5a;
}
inline std::vector<uint8_t> pattern(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> buf(bytes);
  fill_pattern(buf, seed);
  return buf;
}

inline int count_open_fds() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the directory stream itself
}

inline int64_t ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

inline OpDesc p2p_desc(uint64_t count = 0) {
  OpDesc d;
  d.count = count;
  return d;
}

}  // namespace tcp_test
}  // namespace collx

#define ASSERT_OK(expr)                                                         \
  do {                                                                          \
    ::collx::Status assert_ok_status_ = (expr);                                 \
    ASSERT_TRUE(assert_ok_status_.ok()) << assert_ok_status_.message();         \
  } while (0)
#define EXPECT_OK(expr)                                                         \
  do {                                                                          \
    ::collx::Status expect_ok_status_ = (expr);                                 \
    EXPECT_TRUE(expect_ok_status_.ok()) << expect_ok_status_.message();         \
  } while (0)
