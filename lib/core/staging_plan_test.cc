#include "lib/core/staging_plan.h"

#include <gtest/gtest.h>

namespace collx {
namespace {

// Fake device addresses: the plan only does arithmetic on them.
char* at(uintptr_t address) { return reinterpret_cast<char*>(address); }

CollCall v_call(collx_coll_t coll, uintptr_t send, uintptr_t recv, size_t count, std::vector<size_t> counts,
                std::vector<size_t> displs) {
  CollCall c;
  c.coll = coll;
  c.datatype = COLLX_INT32;
  c.sendbuf = at(send);
  c.recvbuf = at(recv);
  c.count = count;
  c.counts = std::move(counts);
  c.displs = std::move(displs);
  return c;
}

TEST(StagingPlan, AllgathervWithGapsCopiesBackOnlyTheReceivedBlocks) {
  // Blocks of 2, 0 and 3 elements at 0, 5 and 7: element 2..6 is a gap but 5 is an empty block.
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(v_call(COLLX_COLL_ALLGATHERV, 0x10000, 0x20000, 2, {2, 0, 3}, {0, 5, 7}), 0, 3, &plan)
                  .ok());
  EXPECT_EQ(plan.send_at, 0u);
  EXPECT_EQ(plan.recv_at, 64u);  // after the 8 bytes of sendbuf, 64-byte aligned
  EXPECT_EQ(plan.bytes, 64u + 40u);
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].device, at(0x10000));
  EXPECT_EQ(plan.in[0].bytes, 8u);
  ASSERT_EQ(plan.out.size(), 2u);
  EXPECT_EQ(plan.out[0].device, at(0x20000));
  EXPECT_EQ(plan.out[0].host, 64u);
  EXPECT_EQ(plan.out[0].bytes, 8u);
  EXPECT_EQ(plan.out[1].device, at(0x20000 + 28));
  EXPECT_EQ(plan.out[1].host, 64u + 28u);
  EXPECT_EQ(plan.out[1].bytes, 12u);
}

TEST(StagingPlan, PackedBlocksAreCopiedBackInOneCopy) {
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(v_call(COLLX_COLL_ALLGATHERV, 0x10000, 0x20000, 1, {1, 2, 3}, {0, 1, 3}), 0, 3, &plan)
                  .ok());
  ASSERT_EQ(plan.out.size(), 1u);
  EXPECT_EQ(plan.out[0].bytes, 24u);
}

TEST(StagingPlan, InPlaceAllgathervKeepsSendbufInsideRecvbufOnTheHost) {
  // Rank 1 of 2: its block (3 elements) is recvbuf + displs[1] = 4 elements.
  StagingPlan plan;
  ASSERT_TRUE(
      plan_staging(v_call(COLLX_COLL_ALLGATHERV, 0x20000 + 16, 0x20000, 3, {4, 3}, {0, 4}), 1, 2, &plan).ok());
  EXPECT_EQ(plan.recv_at, 0u);
  EXPECT_EQ(plan.send_at, 16u);
  EXPECT_EQ(plan.bytes, 28u);
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].host, 16u);
  EXPECT_EQ(plan.in[0].bytes, 12u);
}

TEST(StagingPlan, InPlaceReduceScattervCopiesBackOnlyTheOwnBlock) {
  // Rank 1 of 2, recvcounts {2, 3}: recvbuf = sendbuf + 2 elements.
  StagingPlan plan;
  ASSERT_TRUE(
      plan_staging(v_call(COLLX_COLL_REDUCE_SCATTERV, 0x30000, 0x30000 + 8, 3, {2, 3}, {0, 2}), 1, 2, &plan).ok());
  EXPECT_EQ(plan.send_at, 0u);
  EXPECT_EQ(plan.recv_at, 8u);
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].bytes, 20u);
  ASSERT_EQ(plan.out.size(), 1u);
  EXPECT_EQ(plan.out[0].device, at(0x30000 + 8));
  EXPECT_EQ(plan.out[0].bytes, 12u);
}

TEST(StagingPlan, GathervAwayFromTheRootOnlySends) {
  CollCall c = v_call(COLLX_COLL_GATHERV, 0x10000, 0, 5, {}, {});
  c.recvbuf = nullptr;
  c.root = 0;
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(c, 1, 2, &plan).ok());
  EXPECT_EQ(plan.recv_at, StagingPlan::kNone);
  EXPECT_EQ(plan.bytes, 20u);
  EXPECT_EQ(plan.in.size(), 1u);
  EXPECT_TRUE(plan.out.empty());
}

TEST(StagingPlan, ScattervRootWithAnEmptyOwnBlockStillSendsTheOthers) {
  CollCall c = v_call(COLLX_COLL_SCATTERV, 0x10000, 0x20000, 0, {0, 4}, {0, 0});
  c.root = 0;
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(c, 0, 2, &plan).ok());
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].bytes, 16u);
  EXPECT_TRUE(plan.out.empty());
}

TEST(StagingPlan, AlltoallvReadsTheSendExtentAndWritesTheReceivedBlocks) {
  CollCall c = v_call(COLLX_COLL_ALLTOALLV, 0x10000, 0x20000, 0, {1, 1}, {3, 0});
  c.send_counts = {2, 1};
  c.send_displs = {0, 4};
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(c, 0, 2, &plan).ok());
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].bytes, 20u);
  ASSERT_EQ(plan.out.size(), 2u);
  EXPECT_EQ(plan.out[0].device, at(0x20000));
  EXPECT_EQ(plan.out[1].device, at(0x20000 + 12));
}

TEST(StagingPlan, InPlaceAllreduceIsOneRegionCopiedInAndBack) {
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(v_call(COLLX_COLL_ALLREDUCE, 0x10000, 0x10000, 6, {}, {}), 0, 2, &plan).ok());
  EXPECT_EQ(plan.send_at, 0u);
  EXPECT_EQ(plan.recv_at, 0u);
  EXPECT_EQ(plan.bytes, 24u);
  ASSERT_EQ(plan.in.size(), 1u);
  ASSERT_EQ(plan.out.size(), 1u);
  EXPECT_EQ(plan.out[0].bytes, 24u);
}

TEST(StagingPlan, BroadcastAwayFromTheRootOnlyReceives) {
  CollCall c = v_call(COLLX_COLL_BROADCAST, 0x10000, 0x20000, 4, {}, {});
  c.root = 1;
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(c, 0, 3, &plan).ok());
  EXPECT_TRUE(plan.in.empty());
  ASSERT_EQ(plan.out.size(), 1u);
  EXPECT_EQ(plan.out[0].bytes, 16u);
}

TEST(StagingPlan, AllgatherReceivesEveryRanksBlock) {
  StagingPlan plan;
  ASSERT_TRUE(plan_staging(v_call(COLLX_COLL_ALLGATHER, 0x10000, 0x20000, 3, {}, {}), 1, 4, &plan).ok());
  ASSERT_EQ(plan.in.size(), 1u);
  EXPECT_EQ(plan.in[0].bytes, 12u);
  ASSERT_EQ(plan.out.size(), 1u);
  EXPECT_EQ(plan.out[0].bytes, 48u);
}

TEST(StagingPlan, RefusesABarrier) {
  StagingPlan plan;
  EXPECT_EQ(plan_staging(v_call(COLLX_COLL_BARRIER, 1, 2, 0, {}, {}), 0, 1, &plan).code(), COLLX_ERR_INTERNAL);
}

}  // namespace
}  // namespace collx
