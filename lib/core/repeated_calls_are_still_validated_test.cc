// prepare() skips validation for a call equal to the last accepted one (and reuses the cached
// choice for the same collective, count, type and forced algorithm):
// a call that differs in any checked field (buffers, count, type, op, root, algorithm) must
// still be refused, and the accepted call must keep working (and computing) afterwards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

TEST(RepeatedCalls, AnyChangedFieldIsValidatedAgain) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(64, 1.0f);
  auto good = [&] {
    buf[0] = 2.0f;
    EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 8, 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK)
        << collx_last_error(comm);
    EXPECT_EQ(buf[8], 2.0f);
  };
  for (int i = 0; i < 3; ++i) good();
  // Same call but overlapping buffers.
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 2, 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr),
            COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(comm)).find("overlap"), std::string::npos) << collx_last_error(comm);
  good();
  // Same call but a count that now overlaps.
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 8, 9, COLLX_FLOAT32, COLLX_SUM, comm, nullptr),
            COLLX_ERR_INVALID_ARG);
  good();
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 8, 4, static_cast<collx_datatype_t>(77), COLLX_SUM, comm,
                            nullptr),
            COLLX_ERR_INVALID_ARG);
  good();
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 8, 4, COLLX_FLOAT32, static_cast<collx_op_t>(99), comm,
                            nullptr),
            COLLX_ERR_INVALID_ARG);
  good();
  collx_opts_t opts;
  ASSERT_EQ(collx_opts_init(&opts, sizeof opts), COLLX_OK);
  opts.algorithm = COLLX_ALGO_PAIRWISE;  // alltoall only
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data() + 8, 4, COLLX_FLOAT32, COLLX_SUM, comm, &opts),
            COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(comm)).find("does not implement"), std::string::npos)
      << collx_last_error(comm);
  good();
  // Rooted: the root is part of the check.
  EXPECT_EQ(collx_broadcast(buf.data(), buf.data(), 4, COLLX_FLOAT32, 0, comm, nullptr), COLLX_OK);
  EXPECT_EQ(collx_broadcast(buf.data(), buf.data(), 4, COLLX_FLOAT32, 1, comm, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(comm)).find("root 1"), std::string::npos) << collx_last_error(comm);
  EXPECT_EQ(collx_broadcast(buf.data(), buf.data(), 4, COLLX_FLOAT32, 0, comm, nullptr), COLLX_OK);
  good();
}

}  // namespace
}  // namespace testing
}  // namespace collx
