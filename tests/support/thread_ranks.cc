#include "tests/support/thread_ranks.h"

#include <mutex>
#include <thread>

namespace collx {
namespace testing {

void run_threads(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

std::string create_thread_comms(int size, collx_store_t store, int64_t timeout_ms, uint32_t transports,
                                std::vector<collx_comm_t>* comms) {
  comms->assign(static_cast<size_t>(size), nullptr);
  std::string error;
  std::mutex mutex;
  run_threads(size, [&](int rank) {
    collx_config_t config;
    collx_config_init(&config, sizeof config);
    config.rank = rank;
    config.world_size = size;
    config.store = store;
    config.timeout_ms = timeout_ms;
    config.transports = transports;
    collx_comm_t comm = nullptr;
    collx_status_t rc = collx_comm_create(&config, &comm);
    std::lock_guard<std::mutex> lock(mutex);
    if (rc != COLLX_OK) {
      error += "rank " + std::to_string(rank) + ": " + collx_status_name(rc) + ": " + collx_last_error(nullptr) + "\n";
    }
    (*comms)[static_cast<size_t>(rank)] = comm;
  });
  return error;
}

ThreadRanks::ThreadRanks(int size, int64_t timeout_ms, uint32_t transports) : size_(size), comms_(static_cast<size_t>(size), nullptr) {
  if (collx_store_create_memory(&store_) != COLLX_OK) {
    error_ = "cannot create a memory store";
    return;
  }
  error_ = create_thread_comms(size, store_, timeout_ms, transports, &comms_);
}

ThreadRanks::~ThreadRanks() {
  run_threads(size_, [&](int rank) { collx_comm_destroy(comms_[static_cast<size_t>(rank)]); });
  collx_store_destroy(store_);
}

void ThreadRanks::run(const std::function<void(int rank, collx_comm_t comm)>& fn) {
  run_threads(size_, [&](int rank) { fn(rank, comms_[static_cast<size_t>(rank)]); });
}

}  // namespace testing
}  // namespace collx
