#include "lib/core/selection.h"

#include <gtest/gtest.h>

namespace collx {
namespace {

TEST(AlgorithmSelector, DefaultsPickRecursiveDoublingForSmallAndRingForLargeAllreduce) {
  AlgorithmSelector s;
  ASSERT_TRUE(AlgorithmSelector::parse("", &s).ok());
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RECURSIVE_DOUBLING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 64u << 20, 2, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 64u << 20, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RABENSEIFNER);
  EXPECT_EQ(s.choose(COLLX_COLL_REDUCE_SCATTER, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_BROADCAST, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_BINOMIAL);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLTOALL, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_PAIRWISE);
  EXPECT_EQ(s.choose(COLLX_COLL_BARRIER, 0, 4, COLLX_ALGO_AUTO), COLLX_ALGO_DISSEMINATION);
}

TEST(AlgorithmSelector, SizeRangesApplyFirstMatchWinsAndForcedBeatsRules) {
  AlgorithmSelector s;
  ASSERT_TRUE(AlgorithmSelector::parse("allreduce:0-8K:ring; allreduce:8K-inf:recursive_doubling", &s).ok());
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 100, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 8191, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 8192, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RECURSIVE_DOUBLING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 1u << 30, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RECURSIVE_DOUBLING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 100, 4, COLLX_ALGO_RING), COLLX_ALGO_RING);
  // Collectives without a rule keep their defaults.
  EXPECT_EQ(s.choose(COLLX_COLL_BROADCAST, 100, 4, COLLX_ALGO_AUTO), COLLX_ALGO_BINOMIAL);
}

TEST(AlgorithmSelector, BareAlgorithmAppliesToEveryCollectiveItImplements) {
  AlgorithmSelector s;
  ASSERT_TRUE(AlgorithmSelector::parse("ring", &s).ok());
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLGATHER, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RING);
  EXPECT_EQ(s.choose(COLLX_COLL_BROADCAST, 8, 4, COLLX_ALGO_AUTO), COLLX_ALGO_BINOMIAL);
}

TEST(AlgorithmSelector, AcceptsAliasesAndSpacing) {
  AlgorithmSelector s;
  ASSERT_TRUE(AlgorithmSelector::parse(" ReduceScatter : ring ;allreduce:0-1M:rd;", &s).ok());
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 1000, 4, COLLX_ALGO_AUTO), COLLX_ALGO_RECURSIVE_DOUBLING);
}

TEST(AlgorithmSelector, BadRulesAreErrorsThatNameTheRule) {
  const char* bad[] = {
      "allreduce:rign",            // typo in the algorithm
      "allreduc:ring",             // typo in the collective
      "allgather:recursive_doubling",  // algorithm does not implement it
      "allreduce:8K-0:ring",       // empty range
      "allreduce:0-lots:ring",     // bad size
      "allreduce:1:2:3:ring",      // too many fields
      "auto",                      // auto needs a collective
  };
  for (const char* spec : bad) {
    AlgorithmSelector s;
    Status st = AlgorithmSelector::parse(spec, &s);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG) << spec;
    EXPECT_NE(st.message().find("COLLX_ALGO"), std::string::npos) << st.message();
  }
}

TEST(SelectionBytes, CountsTheWholeBufferForScatterGatherCollectives) {
  EXPECT_EQ(selection_bytes(COLLX_COLL_ALLREDUCE, 10, 4, 8), 40u);
  EXPECT_EQ(selection_bytes(COLLX_COLL_ALLGATHER, 10, 4, 8), 320u);
  EXPECT_EQ(selection_bytes(COLLX_COLL_REDUCE_SCATTER, 10, 4, 8), 320u);
}

}  // namespace
}  // namespace collx
