// Ranks as threads of the test process: one communicator per thread, bootstrapped through an
// in-memory store, driven through the public C API. Communicators live as long as the
// ThreadRanks object, so many cases reuse them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

class ThreadRanks {
 public:
  // Creates `size` communicators concurrently; on failure, ok() is false and error() says why.
  // `transports` is a COLLX_TRANSPORT_* mask (0: the library's default).
  explicit ThreadRanks(int size, int64_t timeout_ms = 60000, uint32_t transports = 0);
  ~ThreadRanks();
  ThreadRanks(const ThreadRanks&) = delete;
  ThreadRanks& operator=(const ThreadRanks&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int size() const { return size_; }
  collx_comm_t comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }

  // Runs fn(rank, comm) on one thread per rank and joins them all.
  void run(const std::function<void(int rank, collx_comm_t comm)>& fn);

 private:
  int size_;
  collx_store_t store_ = nullptr;
  std::vector<collx_comm_t> comms_;
  std::string error_;
};

// Creates `size` communicators over `store` concurrently, one thread per rank; returns ""
// or what failed, rank by rank. The caller owns the communicators (NULL where creation
// failed). `transports` as for ThreadRanks.
std::string create_thread_comms(int size, collx_store_t store, int64_t timeout_ms, uint32_t transports,
                                std::vector<collx_comm_t>* comms);

// Runs fn(rank) on `size` threads and joins them.
void run_threads(int size, const std::function<void(int rank)>& fn);

}  // namespace testing
}  // namespace collx
