// Transport-neutral test helpers: a job of ranks as threads of this process (in-memory
// bootstrap), the parameters every transport takes, content patterns and OpDesc rendering.
// Used by the conformance suite and by each transport's own tests. Header-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/board_bootstrap.h"
#include "transports/transport.h"

namespace collx {
namespace transport_test {

using transport::OpDesc;
using transport::Request;
using TransportPtr = std::unique_ptr<transport::Transport>;

// Renders descriptors like the core does, so tests can look for both sides in messages.
inline std::string describe_op(const OpDesc& d) {
  static const char* kinds[] = {"send", "allreduce", "broadcast", "reduce", "allgather"};
  const char* kind = d.kind < 5 ? kinds[d.kind] : "op";
  return std::string(kind) + " #" + std::to_string(d.seq) + " (count " + std::to_string(d.count) + ")";
}

// Unique per job in this process and across processes (shm names its segments after it).
inline uint64_t next_comm_id() {
  static std::atomic<uint64_t> counter{1};
  return (static_cast<uint64_t>(::getpid()) << 32) | counter.fetch_add(1);
}

// The fields every transport's params struct has, set for a test job.
template <class Params>
Params job_params(int rank, int size, uint64_t comm_id, transport::Bootstrap* bootstrap) {
  Params p;
  p.rank = rank;
  p.size = size;
  p.comm_id = comm_id;
  p.bootstrap = bootstrap;
  p.describe = describe_op;
  p.deadline = Deadline::after_ms(20000);
  return p;
}

// Creates rank `rank`'s transport of a job.
using CreateFn =
    std::function<Status(int rank, int size, uint64_t comm_id, transport::Bootstrap* bootstrap, TransportPtr* out)>;

// Creates `size` transports (concurrently: creation allgathers), then runs fn(rank, t) on one
// thread per rank. Transports are destroyed after every thread ended.
inline void run_thread_job(int size, const CreateFn& create, const std::function<void(int, transport::Transport*)>& fn,
                           uint64_t* comm_out = nullptr) {
  auto board = std::make_shared<testing::Board>(size);
  const uint64_t comm = next_comm_id();
  if (comm_out) *comm_out = comm;
  std::vector<TransportPtr> ts(size);
  std::vector<std::unique_ptr<testing::BoardBootstrap>> boots;
  for (int r = 0; r < size; ++r) boots.push_back(std::make_unique<testing::BoardBootstrap>(board, r));
  std::vector<std::thread> threads;
  std::vector<Status> st(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { st[r] = create(r, size, comm, boots[r].get(), &ts[r]); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
  threads.clear();
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, ts[r].get()); });
  for (auto& t : threads) t.join();
}

// Deterministic content: byte i of message `seed`.
inline uint8_t pattern(uint64_t seed, size_t i) { return static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12)) & 0xff); }
inline void fill(std::vector<uint8_t>& v, uint64_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = pattern(seed, i);
}
// Index of the first wrong byte, or -1.
inline long long first_bad(const std::vector<uint8_t>& v, uint64_t seed) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != pattern(seed, i)) return static_cast<long long>(i);
  }
  return -1;
}

inline Status wait_one(transport::Transport* t, Request* r, int64_t ms = 20000) {
  Request* reqs[] = {r};
  return t->wait_all(reqs, 1, Deadline::after_ms(ms));
}

}  // namespace transport_test
}  // namespace collx
