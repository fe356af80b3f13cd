// Helpers shared by the parallel layer's tests: layouts from a list of sizes, per-rank
// gradient values whose mean is known exactly, and a place to collect cross-thread results.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "lib/api/handles.h"

namespace collx {
namespace testing {

// A finalized layout of float32 tensors with ids 0..n-1 of the given sizes.
inline collx_layout_t make_layout(int32_t dp, const std::vector<size_t>& sizes, size_t bucket_elems = 0,
                                  int32_t partition = COLLX_PART_FLAT, const std::vector<uint32_t>& flags = {}) {
  collx_layout_config_t c;
  collx_layout_config_init(&c, sizeof c);
  c.dp_size = dp;
  c.bucket_elems = bucket_elems;
  c.partition = partition;
  c.align_elems = 4;
  collx_layout_t l = nullptr;
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_OK) << collx_layout_last_error(nullptr);
  for (size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(collx_layout_add(l, i, sizes[i], COLLX_FLOAT32, i < flags.size() ? flags[i] : 0u), COLLX_OK);
  EXPECT_EQ(collx_layout_finalize(l), COLLX_OK);
  return l;
}

// The gradient rank r writes at element j of tensor t: small integers, exact in float32,
// different on every rank so that a missing 1/W or a wrong owner shows.
inline float grad_value(int rank, size_t t, size_t j) {
  return static_cast<float>(static_cast<int>((j * 7 + t * 3 + static_cast<size_t>(rank) * 5) % 17) - 8);
}

inline double mean_value(int world, size_t t, size_t j) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += grad_value(r, t, j);
  return s / world;
}

// Collects one value per rank from rank threads.
template <typename T>
class PerRank {
 public:
  explicit PerRank(int n) : v_(static_cast<size_t>(n)) {}
  void set(int rank, T value) {
    std::lock_guard<std::mutex> lock(mu_);
    v_[static_cast<size_t>(rank)] = std::move(value);
  }
  const T& operator[](int rank) const { return v_[static_cast<size_t>(rank)]; }

 private:
  std::mutex mu_;
  std::vector<T> v_;
};

// The communicator behind `comm`, watched without keeping it alive: it expires once every
// handle and request that held it is gone, so a leaked request handle shows.
inline std::weak_ptr<Communicator> watch_communicator(collx_comm_t comm) { return comm->impl; }

// One rank waits for another to reach a point (tests where a rank must stay away first).
class Signal {
 public:
  void raise() {
    std::lock_guard<std::mutex> lock(mu_);
    raised_ = true;
    cv_.notify_all();
  }
  // False when not raised within a minute (the test then fails instead of hanging).
  bool wait() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return raised_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool raised_ = false;
};

}  // namespace testing
}  // namespace collx
