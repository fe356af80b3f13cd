// collx_layout_verify across 3 thread ranks: agreement, and the first differing tensor or
// config field named identically on every rank, without a hang.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::ThreadRanks;

struct T {
  uint64_t id;
  size_t numel;
  collx_datatype_t dtype;
  uint32_t flags;
};

std::vector<T> base() {
  return {{3, 64, COLLX_FLOAT32, 0}, {5, 10, COLLX_FLOAT32, 0}, {7, 1024, COLLX_BFLOAT16, 0}, {9, 1, COLLX_FLOAT32, 0}};
}

// Each rank builds the layout `make(rank)` describes, then verifies; returns the messages.
void run_verify(ThreadRanks& world, const std::function<void(int, collx_layout_config_t*, std::vector<T>*)>& edit,
                collx_status_t want, const std::string& needle) {
  std::mutex mu;
  std::vector<std::string> msgs(static_cast<size_t>(world.size()));
  world.run([&](int rank, collx_comm_t comm) {
    collx_layout_config_t c;
    collx_layout_config_init(&c, sizeof c);
    c.dp_size = 3;
    std::vector<T> ts = base();
    edit(rank, &c, &ts);
    collx_layout_t l = nullptr;
    ASSERT_EQ(collx_layout_create(&c, &l), COLLX_OK);
    for (const T& t : ts) ASSERT_EQ(collx_layout_add(l, t.id, t.numel, t.dtype, t.flags), COLLX_OK);
    ASSERT_EQ(collx_layout_finalize(l), COLLX_OK);
    EXPECT_EQ(collx_layout_verify(l, comm), want) << "rank " << rank << ": " << collx_layout_last_error(l);
    std::lock_guard<std::mutex> lock(mu);
    msgs[static_cast<size_t>(rank)] = collx_layout_last_error(l);
    collx_layout_destroy(l);
  });
  for (size_t r = 0; r < msgs.size(); ++r) {
    EXPECT_EQ(msgs[r], msgs[0]) << "ranks disagree on the message";
    if (!needle.empty()) {
      EXPECT_NE(msgs[r].find(needle), std::string::npos) << msgs[r];
    }
  }
}

TEST(ParallelLayoutVerify, NamesTheFirstDifferingTensor) {
  ThreadRanks world(3, 5000);
  ASSERT_TRUE(world.ok()) << world.error();
  auto none = [](int, collx_layout_config_t*, std::vector<T>*) {};
  run_verify(world, none, COLLX_OK, "");
  // Rank 2 registers tensor 7 with 1000 elements (and tensor 9 differs too: not named).
  run_verify(world, [](int rank, collx_layout_config_t*, std::vector<T>* ts) {
    if (rank == 2) { (*ts)[2].numel = 1000; (*ts)[3].numel = 2; }
  }, COLLX_ERR_MISMATCH, "rank 2 registered tensor 7 with numel 1000 but rank 0 with numel 1024");
  // Rank 1 registers tensors in another order.
  run_verify(world, [](int rank, collx_layout_config_t*, std::vector<T>* ts) {
    if (rank == 1) std::swap((*ts)[0], (*ts)[1]);
  }, COLLX_ERR_MISMATCH, "registration index 0: rank 1 registered tensor 5");
  // Rank 1 misses the last tensor.
  run_verify(world, [](int rank, collx_layout_config_t*, std::vector<T>* ts) {
    if (rank == 1) ts->pop_back();
  }, COLLX_ERR_MISMATCH, "rank 1 registered only 3 tensors but rank 0 registered tensor 9");
  // Datatype and flags.
  run_verify(world, [](int rank, collx_layout_config_t*, std::vector<T>* ts) {
    if (rank == 2) { (*ts)[1].dtype = COLLX_FLOAT16; (*ts)[1].flags = COLLX_TENSOR_SHARED; }
  }, COLLX_ERR_MISMATCH, "rank 2 registered tensor 5 with datatype float16, flags 0x8 but rank 0 with datatype float32, flags 0x0");
  // A config field.
  run_verify(world, [](int rank, collx_layout_config_t* c, std::vector<T>*) {
    if (rank == 1) c->align_elems = 128;
  }, COLLX_ERR_MISMATCH, "rank 1 has align_elems = 128 but rank 0 has 64");
  // The communicator is still usable afterwards.
  run_verify(world, none, COLLX_OK, "");
}

}  // namespace
