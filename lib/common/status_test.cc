// Status: the remote cause code a peer's failure carries survives added context, and is what
// a rank passes on when it relays that failure.
#include "lib/common/status.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace collx {
namespace {

TEST(Status, RemoteCodeIsUnsetUnlessAPeerToldIt) {
  Status died = make_status(COLLX_ERR_REMOTE, "rank 3 died");
  EXPECT_EQ(died.remote_code(), COLLX_OK);
  EXPECT_EQ(died.cause_code(), COLLX_ERR_REMOTE);
  EXPECT_EQ(make_status(COLLX_ERR_TIMEOUT, "late").cause_code(), COLLX_ERR_TIMEOUT);
}

TEST(Status, RemoteCodeSurvivesContextAndIsTheCauseOfARelay) {
  Status told = make_status(COLLX_ERR_REMOTE, "rank 0 failed: COLLX_ERR_TIMEOUT: ...").with_remote_code(COLLX_ERR_TIMEOUT);
  Status in_call = told.with_context("allreduce #2 on rank 1: ");
  EXPECT_EQ(in_call.code(), COLLX_ERR_REMOTE);
  EXPECT_EQ(in_call.remote_code(), COLLX_ERR_TIMEOUT);
  EXPECT_EQ(in_call.cause_code(), COLLX_ERR_TIMEOUT);
  EXPECT_EQ(in_call.message(), "allreduce #2 on rank 1: rank 0 failed: COLLX_ERR_TIMEOUT: ...");
}

TEST(Status, TheTextDoesNotMakeACause) {
  // A mismatch whose text happens to mention a timeout is still a mismatch.
  Status told = make_status(COLLX_ERR_REMOTE, "rank 0 failed: COLLX_ERR_MISMATCH: COLLX_ERR_TIMEOUT in a name")
                    .with_remote_code(COLLX_ERR_MISMATCH);
  EXPECT_EQ(told.remote_code(), COLLX_ERR_MISMATCH);
  EXPECT_EQ(told.cause_code(), COLLX_ERR_MISMATCH);
}

}  // namespace
TEST(Status, APeersCodeOutsideThePublicListBecomesRemote) {
  EXPECT_EQ(status_code_from_peer(COLLX_ERR_TIMEOUT), COLLX_ERR_TIMEOUT);
  EXPECT_EQ(status_code_from_peer(COLLX_STATUS_LAST_ + 1), COLLX_STATUS_LAST_ + 1);
  for (int64_t bad : {int64_t{-12345}, int64_t{COLLX_STATUS_LAST_}, int64_t{0}, int64_t{7}, INT64_MIN}) {
    EXPECT_EQ(status_code_from_peer(bad), COLLX_ERR_REMOTE) << bad;
  }
}

}  // namespace collx
