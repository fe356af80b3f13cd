// The tuner: the cost model's ranking, tune files (good and bad), and how the selector
// combines COLLX_ALGO rules with the model.
#include <gtest/gtest.h>

#include <algorithm>

#include "lib/core/cost_model.h"
#include "lib/core/selection.h"
#include "lib/core/tune_file.h"

namespace collx {
namespace {

TEST(CostModel, LatencyBoundSizesPickRecursiveDoublingBandwidthBoundPickRingOrRabenseifner) {
  for (const char* transport : {"tcp", "shm", "ucx"}) {
    CostModel model(transport, default_link_cost(transport));
    SCOPED_TRACE(transport);
    EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, 8, 4, 512 << 10), COLLX_ALGO_RECURSIVE_DOUBLING);
    EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, 64u << 20, 2, 512 << 10), COLLX_ALGO_RING);  // tie: ring first
    EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, 64u << 20, 3, 512 << 10), COLLX_ALGO_RING);  // folding costs a copy
    EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, 64u << 20, 4, 512 << 10), COLLX_ALGO_RABENSEIFNER);
    EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, 64u << 20, 8, 512 << 10), COLLX_ALGO_RABENSEIFNER);
  }
}

TEST(CostModel, PredictionsGrowWithSizeAndTheCutOverMovesWithLatency) {
  CostModel cheap("x", LinkCost{1.0, 0.2, 0.2});
  CostModel slow("x", LinkCost{100.0, 0.2, 0.2});
  EXPECT_LT(cheap.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, 1 << 20, 4, 512 << 10).micros,
            cheap.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, 4 << 20, 4, 512 << 10).micros);
  // Where recursive doubling stops winning: later when messages are expensive.
  auto cut_over = [](const CostModel& m) {
    uint64_t bytes = 64;
    while (m.best(COLLX_COLL_ALLREDUCE, bytes, 4, 512 << 10) == COLLX_ALGO_RECURSIVE_DOUBLING) bytes *= 2;
    return bytes;
  };
  EXPECT_LT(cut_over(cheap), cut_over(slow));
  EXPECT_EQ(cheap.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, 1 << 20, 1, 512 << 10).micros, 0.0);
}

TEST(CostModel, RingMessagesCountStepsTimesChunks) {
  CostModel model("tcp", default_link_cost("tcp"));
  // 4 ranks, 8 MiB: each step moves 2 MiB = 4 chunks of 512 KiB; all-reduce has 6 steps.
  EXPECT_EQ(model.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, 8u << 20, 4, 512 << 10).messages, 24u);
  EXPECT_EQ(model.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_RING, 8u << 20, 4, 512 << 10).messages, 12u);
}

TEST(CostModel, SharedMemoryIsACandidateOnlyWhereTheTransportHasSharedBoards) {
  CostModel tcp("tcp", default_link_cost("tcp"));
  CostModel shm("shm", default_link_cost("shm"));
  shm.set_shared_boards(512 << 10, /*direct_reads=*/true);
  for (collx_coll_t coll : {COLLX_COLL_ALLREDUCE, COLLX_COLL_REDUCE_SCATTER, COLLX_COLL_ALLGATHER}) {
    auto has = [coll](const CostModel& m) {
      auto c = m.candidates_here(coll);
      return std::find(c.begin(), c.end(), COLLX_ALGO_SHARED_MEMORY) != c.end();
    };
    EXPECT_FALSE(has(tcp)) << coll;
    EXPECT_TRUE(has(shm)) << coll;
  }
  auto b = shm.candidates_here(COLLX_COLL_BROADCAST);
  EXPECT_EQ(std::find(b.begin(), b.end(), COLLX_ALGO_SHARED_MEMORY), b.end());
  // One meeting instead of log2 p messages: small all-reduces go through shared memory.
  for (int ranks : {2, 4, 8}) {
    EXPECT_EQ(shm.best(COLLX_COLL_ALLREDUCE, 8, ranks, 512 << 10), COLLX_ALGO_SHARED_MEMORY) << ranks;
    EXPECT_EQ(tcp.best(COLLX_COLL_ALLREDUCE, 8, ranks, 512 << 10), COLLX_ALGO_RECURSIVE_DOUBLING) << ranks;
  }
  // Through the boards, more rounds cost more meetings; reading peers' buffers in place is one
  // round (two meetings) whatever the size.
  CostModel copies("shm", default_link_cost("shm"));
  copies.set_shared_boards(512 << 10, /*direct_reads=*/false);
  EXPECT_LT(copies.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_SHARED_MEMORY, 1 << 20, 4, 0).messages,
            copies.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_SHARED_MEMORY, 64 << 20, 4, 0).messages);
  EXPECT_EQ(shm.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_SHARED_MEMORY, 64 << 20, 4, 0).messages, 2u);
  EXPECT_LT(shm.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_SHARED_MEMORY, 64 << 20, 4, 0).micros,
            copies.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_SHARED_MEMORY, 64 << 20, 4, 0).micros);
}

TEST(TuneFile, ParsesWhatItFormats) {
  TunedCosts costs = {{"shm", LinkCost{3.5, 0.125, 0.25}}, {"tcp", LinkCost{28, 0.5, 0.25}}};
  TunedCosts back;
  Status st = parse_tune_text(format_tune_file(costs), "mem", &back);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_DOUBLE_EQ(back["shm"].alpha_us, 3.5);
  EXPECT_DOUBLE_EQ(back["tcp"].beta_ns_per_byte, 0.5);
}

TEST(TuneFile, BadFilesAreErrorsNamingTheLine) {
  const std::pair<const char*, const char*> bad[] = {
      {"shm 1 2 3\n", "missing"},                                      // no version line
      {"# collx tune file 2\nshm 1 2 3\n", "unsupported version"},    // future version
      {"# collx tune file 1\nshm 1 2\n", "line 2"},                   // too few fields
      {"# collx tune file 1\nshm 1 -2 3\n", "positive"},              // negative
      {"# collx tune file 1\nshm 1 nan 3\n", "positive"},             // not finite
      {"# collx tune file 1\nshm 1 2 3x\n", "positive"},              // trailing junk
      {"# collx tune file 1\nshm 1 2 3\nshm 1 2 3\n", "twice"},       // duplicate
  };
  for (const auto& [text, expected] : bad) {
    TunedCosts out;
    Status st = parse_tune_text(text, "t.tune", &out);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG) << text;
    EXPECT_NE(st.message().find("t.tune"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
  }
  TunedCosts out;
  EXPECT_EQ(load_tune_file("/nonexistent/collx.tune", &out).code(), COLLX_ERR_INVALID_ARG);
}

TEST(AlgorithmSelector, RulesBeatTheModelAndAutoRulesHandBackToIt) {
  AlgorithmSelector s;
  ASSERT_TRUE(AlgorithmSelector::parse("allreduce:0-1K:auto;allreduce:ring", &s).ok());
  CostModel model("shm", default_link_cost("shm"));
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 8, 4, COLLX_ALGO_AUTO, model, 512 << 10), COLLX_ALGO_RECURSIVE_DOUBLING);
  EXPECT_EQ(s.choose(COLLX_COLL_ALLREDUCE, 64u << 20, 4, COLLX_ALGO_AUTO, model, 512 << 10), COLLX_ALGO_RING);
  EXPECT_EQ(s.matching_rule(COLLX_COLL_ALLREDUCE, 64u << 20), "allreduce:ring");
  EXPECT_EQ(s.matching_rule(COLLX_COLL_BROADCAST, 64u << 20), "");
}

}  // namespace
}  // namespace collx
