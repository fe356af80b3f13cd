// Failures inside collectives: a rank that never calls (deadline), a connection failing
// mid-collective, ranks calling different operations, scratch allocation failure. In every
// case each rank must return an error (never hang, never report wrong data as success),
// and must leave no request pending: the in-process transport checks that no buffer is
// touched after the call returned.
#include <gtest/gtest.h>

#include <thread>

#include "algorithms/algorithm_test_harness.h"

namespace collx {
namespace algo {
namespace {

using namespace testing_support;
using testing::InprocFabric;
using testing::InprocOptions;
using SendMode = InprocOptions::SendMode;

constexpr collx_datatype_t kType = COLLX_FLOAT32;

const AlgorithmInfo& find_algorithm(const std::string& name) {
  for (const AlgorithmInfo& a : all_algorithms()) {
    if (name == a.name) return a;
  }
  ADD_FAILURE() << "no algorithm " << name;
  return all_algorithms().front();
}

// Buffers large enough for any collective of `count` elements on `size` ranks.
struct Buffers {
  Buffers(int size, size_t count) : send(count * size, 1.0f), recv(count * size, -7.0f) {}
  std::vector<float> send;
  std::vector<float> recv;
};

CollArgs make_args(const AlgorithmInfo& algo, Buffers& b, size_t count, int root, int64_t timeout_ms) {
  CollArgs args;
  args.sendbuf = b.send.data();
  args.recvbuf = b.recv.data();
  args.count = count;
  args.datatype = kType;
  args.op = COLLX_SUM;
  args.root = root;
  args.desc = make_desc(algo, count, kType, COLLX_SUM, root, 11);
  args.deadline = Deadline::after_ms(timeout_ms);
  return args;
}

bool every_rank_waits_for_all(collx_coll_t kind) {
  return kind != COLLX_COLL_BROADCAST && kind != COLLX_COLL_REDUCE;
}

class FailureEveryAlgorithm : public ::testing::TestWithParam<std::string> {};

// One rank never calls: the others return COLLX_ERR_TIMEOUT by their deadline, one of them
// naming the missing rank, with nothing left pending — when the missing rank finally runs,
// its messages must not land in the buffers of ranks that already returned.
TEST_P(FailureEveryAlgorithm, MissingRankTimesOutNamingItAndLeavesNothingPending) {
  const AlgorithmInfo& algo = find_algorithm(GetParam());
  for (SendMode mode : {SendMode::kEager, SendMode::kRendezvous}) {
    SCOPED_TRACE(mode == SendMode::kEager ? "eager" : "rendezvous");
    const int p = 5;
    const int missing = 2;
    // Broadcast: everyone depends on the root. Reduce: the root depends on everyone.
    const int root = algo.kind == COLLX_COLL_BROADCAST ? missing : 0;
    const size_t count = 1000;
    InprocOptions options;
    options.send_mode = mode;
    InprocFabric fabric(p, options);
    RankPools pools(p);
    std::vector<std::unique_ptr<Buffers>> buffers;
    for (int r = 0; r < p; ++r) buffers.push_back(std::make_unique<Buffers>(p, count));
    std::vector<Status> statuses(p);

    fabric.run([&](int rank) {
      if (rank == missing) return;
      CollArgs args = make_args(algo, *buffers[rank], count, root, 300);
      statuses[rank] = algo.fn(make_context(fabric, pools, rank, 256), args);
    });

    bool named = false;
    int timed_out = 0;
    std::vector<std::vector<float>> snapshots(p);
    for (int r = 0; r < p; ++r) {
      if (r == missing) continue;
      const Status& st = statuses[r];
      if (!st.ok()) {
        EXPECT_EQ(st.code(), COLLX_ERR_TIMEOUT) << "rank " << r << ": " << st.message();
        ++timed_out;
        named = named || st.message().find(string_printf("rank %d ", missing)) != std::string::npos;
      } else {
        EXPECT_FALSE(every_rank_waits_for_all(algo.kind)) << "rank " << r << " finished without rank " << missing;
      }
      EXPECT_EQ(fabric.outstanding_requests(r), 0u) << "rank " << r << " left requests pending";
      snapshots[r] = buffers[r]->recv;
      fabric.seal(r);
    }
    EXPECT_GT(timed_out, 0);
    EXPECT_TRUE(named) << "no rank named the missing rank " << missing;

    // The late rank runs alone; whatever it sends must stay in the transport's queues.
    std::thread late([&] {
      CollArgs args = make_args(algo, *buffers[missing], count, root, 300);
      algo.fn(make_context(fabric, pools, missing, 256), args).ignore();
    });
    late.join();
    EXPECT_EQ(fabric.seal_violations(), 0u) << "a buffer was touched after its collective returned";
    for (int r = 0; r < p; ++r) {
      if (r != missing) {
        EXPECT_EQ(snapshots[r], buffers[r]->recv) << "rank " << r << "'s recvbuf changed";
      }
    }
  }
}

// A receive fails mid-collective. Either the transport then poisons itself and tells its
// peers (every rank fails promptly), or it stays healthy and only that receive failed (the
// failing rank alone must cancel the rest; its peers end by their deadline). Either way the
// failing rank reports the transport's error and no request is left pending anywhere.
void check_failure_mid_collective(const AlgorithmInfo& algo, bool transport_poisons) {
  for (SendMode mode : {SendMode::kEager, SendMode::kRendezvous}) {
    SCOPED_TRACE(mode == SendMode::kEager ? "eager" : "rendezvous");
    const int p = 5;
    const size_t count = 4000;
    // A rank that receives at least two messages in this collective; fail its second.
    const int victim = algo.kind == COLLX_COLL_REDUCE ? 0 : 1;
    InprocOptions options;
    options.send_mode = mode;
    InprocFabric fabric(p, options);
    RankPools pools(p);
    std::vector<std::unique_ptr<Buffers>> buffers;
    for (int r = 0; r < p; ++r) buffers.push_back(std::make_unique<Buffers>(p, count));
    std::vector<Status> statuses(p);
    fabric.fail_delivery(victim, 2, make_status(COLLX_ERR_REMOTE, "injected connection failure"), transport_poisons);

    fabric.run([&](int rank) {
      CollArgs args = make_args(algo, *buffers[rank], count, 0, transport_poisons ? 20000 : 300);
      statuses[rank] = algo.fn(make_context(fabric, pools, rank, 256), args);
    });

    EXPECT_FALSE(statuses[victim].ok());
    EXPECT_NE(statuses[victim].message().find("injected"), std::string::npos) << statuses[victim].message();
    for (int r = 0; r < p; ++r) {
      if (transport_poisons) {
        EXPECT_NE(statuses[r].code(), COLLX_ERR_TIMEOUT) << "rank " << r << " waited for its deadline";
      }
      EXPECT_EQ(fabric.outstanding_requests(r), 0u) << "rank " << r << " left requests pending";
      fabric.seal(r);
    }
    EXPECT_EQ(fabric.seal_violations(), 0u);
  }
}

TEST_P(FailureEveryAlgorithm, FailureMidCollectivePoisoningTheTransportLeavesNothingPending) {
  check_failure_mid_collective(find_algorithm(GetParam()), true);
}

TEST_P(FailureEveryAlgorithm, FailedReceiveMidCollectiveIsCleanedUpByTheAlgorithm) {
  check_failure_mid_collective(find_algorithm(GetParam()), false);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, FailureEveryAlgorithm,
                         ::testing::Values("allreduce_ring", "allreduce_recursive_doubling", "allreduce_rabenseifner",
                                           "reduce_scatter_ring",
                                           "allgather_ring", "broadcast_binomial", "reduce_binomial",
                                           "alltoall_pairwise", "barrier_dissemination"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Ranks calling with different counts get COLLX_ERR_MISMATCH naming both calls, not
// wrong data. Rank 0 (the odd one) and at least one neighbour it exchanged with report the
// mismatch (which ones depends on timing); a rank not involved ends by its deadline;
// nothing stays pending.
TEST(Mismatch, DifferentCountsAreReportedByBothRanksInvolved) {
  const AlgorithmInfo& algo = find_algorithm("allreduce_ring");
  const int p = 3;
  InprocFabric fabric(p);
  RankPools pools(p);
  std::vector<std::unique_ptr<Buffers>> buffers;
  for (int r = 0; r < p; ++r) buffers.push_back(std::make_unique<Buffers>(p, 1000));
  std::vector<Status> statuses(p);
  fabric.run([&](int rank) {
    const size_t count = rank == 0 ? 1000 : 999;
    CollArgs args = make_args(algo, *buffers[rank], count, -1, 500);
    statuses[rank] = algo.fn(make_context(fabric, pools, rank, 4096), args);
  });
  int mismatches = 0;
  for (int r = 0; r < p; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r << " succeeded";
    if (statuses[r].code() != COLLX_ERR_MISMATCH) continue;
    ++mismatches;
    EXPECT_NE(statuses[r].message().find("count 1000"), std::string::npos) << statuses[r].message();
    EXPECT_NE(statuses[r].message().find("count 999"), std::string::npos) << statuses[r].message();
  }
  EXPECT_EQ(statuses[0].code(), COLLX_ERR_MISMATCH) << statuses[0].message();
  EXPECT_GE(mismatches, 2);
  for (int r = 0; r < p; ++r) EXPECT_EQ(fabric.outstanding_requests(r), 0u);
}

// Scratch that cannot be allocated gives COLLX_ERR_NO_MEMORY before anything is sent.
TEST(Scratch, AllocationFailureReturnsNoMemory) {
  const size_t huge = size_t{1} << 58;  // elements; never touched
  for (const char* name : {"allreduce_ring", "allreduce_recursive_doubling", "reduce_scatter_ring", "reduce_binomial"}) {
    SCOPED_TRACE(name);
    const AlgorithmInfo& algo = find_algorithm(name);
    const int p = 2;
    InprocFabric fabric(p);
    RankPools pools(p);
    float buffer[4] = {};
    CollArgs args;
    args.sendbuf = buffer;  // in place: nothing is copied before the scratch is needed
    args.recvbuf = buffer;
    args.count = algo.kind == COLLX_COLL_REDUCE_SCATTER ? huge / 2 : huge;
    args.datatype = kType;
    args.root = 0;
    args.desc = make_desc(algo, args.count, kType, COLLX_SUM, 0, 1);
    args.deadline = Deadline::after_ms(1000);
    Status st = algo.fn(make_context(fabric, pools, 0, size_t{1} << 62), args);
    EXPECT_EQ(st.code(), COLLX_ERR_NO_MEMORY) << st.message();
    EXPECT_EQ(fabric.outstanding_requests(0), 0u);
    EXPECT_EQ(fabric.unexpected_messages(1), 0u) << "sent something before failing";
  }
}

}  // namespace
}  // namespace algo
}  // namespace collx
