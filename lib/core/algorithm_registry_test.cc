// The algorithm registry is the one statement of which algorithm implements which
// collective: every (algorithm, collective) pair the enums allow is either in it (and chosen
// when forced) or refused with its message, and the header's enum comments and
// docs/algorithms.md say what it says.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "algorithms/registry.h"
#include "lib/core/cost_model.h"
#include "lib/core/names.h"
#include "lib/core/registry_markdown.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

std::string read_source(const std::string& path) {
  std::ifstream in(std::string(COLLX_SOURCE_DIR) + "/" + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AlgorithmRegistry, EveryPairIsChosenWhenForcedOrRefusedWithTheRegistryMessage) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  const char* transport = nullptr;
  ASSERT_EQ(collx_comm_transport(comm, &transport), COLLX_OK);
  collx_opts_t opts;
  ASSERT_EQ(collx_opts_init(&opts, sizeof opts), COLLX_OK);
  for (int a = 0; a <= COLLX_NUM_ALGORITHMS; ++a) {  // one past the end: out of range
    for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
      SCOPED_TRACE(std::string(algorithm_name(a)) + " for " + coll_name(c));
      opts.algorithm = a;
      collx_algorithm_t chosen = COLLX_ALGO_AUTO;
      const collx_status_t st =
          collx_select_algorithm(comm, static_cast<collx_coll_t>(c), 16, COLLX_FLOAT32, &opts, &chosen);
      const std::string message = st == COLLX_OK ? "" : collx_last_error(comm);
      const algo::Implementation* entry = algo::find_implementation(a, c);
      if (a == COLLX_ALGO_AUTO) {
        EXPECT_EQ(st, COLLX_OK) << message;
        EXPECT_NE(algo::find_implementation(chosen, c), nullptr) << algorithm_name(chosen);
      } else if (!entry) {
        EXPECT_EQ(st, COLLX_ERR_INVALID_ARG);
        EXPECT_NE(message.find(not_implemented(a, c)), std::string::npos) << message;
      } else if ((algo::algorithm_info(a)->needs & algo::kNeedsSharedBoards) && std::string(transport) != "shm") {
        EXPECT_EQ(st, COLLX_ERR_INVALID_ARG);
        EXPECT_NE(message.find("needs the shm transport"), std::string::npos) << message;
      } else {
        EXPECT_EQ(st, COLLX_OK) << message;
        EXPECT_EQ(chosen, a);
      }
    }
  }
}

TEST(AlgorithmRegistry, ACallForcingAnUnimplementedAlgorithmGetsTheSameMessage) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  collx_opts_t opts;
  ASSERT_EQ(collx_opts_init(&opts, sizeof opts), COLLX_OK);
  opts.algorithm = COLLX_ALGO_BINOMIAL;
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(collx_allgather(x, x, 1, COLLX_FLOAT32, comm, &opts), COLLX_ERR_INVALID_ARG);
  const std::string message = collx_last_error(comm);
  EXPECT_NE(message.find(std::string("allgather: ") + not_implemented(COLLX_ALGO_BINOMIAL, COLLX_COLL_ALLGATHER)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(it implements broadcast, reduce)"), std::string::npos) << message;
}

TEST(AlgorithmRegistry, EveryEntryHasAScheduleOrACoreRouteAndEveryCollectiveACandidate) {
  size_t count = 0;
  const algo::Implementation* table = algo::implementations(&count);
  for (size_t i = 0; i < count; ++i) {
    const bool core_route = table[i].algorithm == COLLX_ALGO_HIERARCHICAL || table[i].coll == COLLX_COLL_SEND ||
                            table[i].coll == COLLX_COLL_RECV;
    EXPECT_EQ(table[i].run == nullptr, core_route) << algorithm_name(table[i].algorithm) << " for "
                                                   << coll_name(table[i].coll);
    for (size_t j = 0; j < i; ++j) {
      EXPECT_FALSE(table[j].algorithm == table[i].algorithm && table[j].coll == table[i].coll) << "duplicate " << i;
    }
  }
  for (int a = 0; a < COLLX_NUM_ALGORITHMS; ++a) EXPECT_EQ(algo::algorithms()[a].id, a);
  for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
    EXPECT_FALSE(CostModel::candidates(static_cast<collx_coll_t>(c)).empty()) << coll_name(c);
  }
}

TEST(AlgorithmRegistry, HeaderEnumCommentsListTheCollectivesOfTheRegistry) {
  const std::string header = read_source("include/collx/collx.h");
  ASSERT_FALSE(header.empty());
  // "COLLX_ALGO_RING = 1,   /* allreduce, reduce_scatter, allgather: description */"
  const std::regex line(R"(COLLX_ALGO_[A-Z_]+ = (\d+),\s*/\* ([a-z_, ]+):)");
  int seen = 0;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), line); it != std::sregex_iterator(); ++it) {
    const int a = std::stoi((*it)[1]);
    EXPECT_EQ((*it)[2].str(), colls_of(a)) << "collx.h's comment of " << algorithm_name(a);
    ++seen;
  }
  EXPECT_EQ(seen, COLLX_NUM_ALGORITHMS - 1);  // every algorithm but AUTO
}

TEST(AlgorithmRegistry, DocsAlgorithmsMdIsGeneratedFromTheRegistry) {
  EXPECT_EQ(read_source("docs/algorithms.md"), algorithms_markdown())
      << "regenerate: build/tools/collx-info --algorithms-markdown > docs/algorithms.md";
}

}  // namespace
}  // namespace testing
}  // namespace collx
