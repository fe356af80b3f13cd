// A store server hosted by collx_store_create_tcp lives until collx_store_destroy and every
// communicator made from the store are gone (collx.h): communicators made from it keep
// bootstrapping through it after the handle is destroyed (split, dup, shrink).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/thread_ranks.h"

namespace collx {
namespace {

constexpr int kRanks = 2;
// Generous for a loaded machine, short enough that a store that went away fails in time.
constexpr int64_t kTimeoutMs = 15000;

std::string why(collx_status_t rc, collx_comm_t comm) {
  return std::string(collx_status_name(rc)) + ": " + collx_last_error(comm);
}

// Sums the ranks over `comm`: proves the new communicator works.
void expect_rank_sum(collx_comm_t comm, int size) {
  int32_t rank = -1;
  ASSERT_EQ(collx_comm_rank(comm, &rank), COLLX_OK);
  float value = static_cast<float>(rank);
  collx_status_t rc = collx_allreduce(&value, &value, 1, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
  ASSERT_EQ(rc, COLLX_OK) << why(rc, comm);
  EXPECT_EQ(value, static_cast<float>(size * (size - 1) / 2));
}

TEST(HostedStore, OutlivesItsHandleWhileCommunicatorsMadeFromItLive) {
  collx_store_t store = nullptr;
  ASSERT_EQ(collx_store_create_tcp("127.0.0.1:0", /*is_server=*/1, kTimeoutMs, &store), COLLX_OK)
      << collx_last_error(nullptr);
  std::vector<collx_comm_t> comms;
  const std::string error = testing::create_thread_comms(kRanks, store, kTimeoutMs, 0, &comms);
  // The caller's reference goes; the communicators' must keep the server running.
  ASSERT_EQ(collx_store_destroy(store), COLLX_OK);
  ASSERT_EQ(error, "");

  testing::run_threads(kRanks, [&](int rank) {
    collx_comm_t comm = comms[static_cast<size_t>(rank)];
    collx_comm_t dup = nullptr, split = nullptr, shrunk = nullptr;
    collx_status_t rc = collx_comm_dup(comm, &dup);
    ASSERT_EQ(rc, COLLX_OK) << "dup: " << why(rc, comm);
    expect_rank_sum(dup, kRanks);
    rc = collx_comm_split(comm, /*color=*/0, /*key=*/rank, &split);
    ASSERT_EQ(rc, COLLX_OK) << "split: " << why(rc, comm);
    expect_rank_sum(split, kRanks);
    rc = collx_comm_shrink(comm, kTimeoutMs, &shrunk);
    ASSERT_EQ(rc, COLLX_OK) << "shrink: " << why(rc, comm);
    expect_rank_sum(shrunk, kRanks);
    // The communicators made after the handle went keep the server too.
    EXPECT_EQ(collx_comm_destroy(comm), COLLX_OK);
    collx_comm_t again = nullptr;
    rc = collx_comm_dup(dup, &again);
    ASSERT_EQ(rc, COLLX_OK) << "dup of the dup: " << why(rc, dup);
    expect_rank_sum(again, kRanks);
    for (collx_comm_t c : {dup, split, shrunk, again}) EXPECT_EQ(collx_comm_destroy(c), COLLX_OK);
  });
}

}  // namespace
}  // namespace collx
