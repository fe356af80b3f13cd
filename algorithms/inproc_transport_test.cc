// The in-process transport the algorithm tests run on (tests/support/inproc_transport.h):
// it must itself follow transports/transport.h, or algorithm tests prove nothing.
#include "tests/support/inproc_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace collx {
namespace testing {
namespace {

using transport::OpDesc;
using transport::Request;
using SendMode = InprocOptions::SendMode;

OpDesc desc_with(uint64_t count, uint64_t seq = 1) {
  OpDesc d;
  d.count = count;
  d.seq = seq;
  return d;
}

InprocOptions with_mode(SendMode mode) {
  InprocOptions o;
  o.send_mode = mode;
  return o;
}

Status wait_one(transport::Transport* t, Request* r, int64_t ms = 5000) {
  return t->wait_all(&r, 1, Deadline::after_ms(ms));
}

class BothModes : public ::testing::TestWithParam<SendMode> {};

TEST_P(BothModes, MatchesInOrderPerSourceAndTag) {
  InprocFabric fabric(2, with_mode(GetParam()));
  auto* a = fabric.endpoint(0);
  auto* b = fabric.endpoint(1);
  const OpDesc d = desc_with(1);
  int values[4] = {1, 2, 3, 40};
  Request sends[4];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->post_send(&sends[i], 1, 7, &values[i], sizeof(int), d).ok());
  ASSERT_TRUE(a->post_send(&sends[3], 1, 8, &values[3], sizeof(int), d).ok());
  int got[4] = {};
  Request recvs[4];
  ASSERT_TRUE(b->post_recv(&recvs[3], 0, 8, &got[3], sizeof(int), d).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b->post_recv(&recvs[i], 0, 7, &got[i], sizeof(int), d).ok());
  Request* all[4] = {&recvs[0], &recvs[1], &recvs[2], &recvs[3]};
  ASSERT_TRUE(b->wait_all(all, 4, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_EQ(got[2], 3);
  EXPECT_EQ(got[3], 40);
  Request* sent[4] = {&sends[0], &sends[1], &sends[2], &sends[3]};
  EXPECT_TRUE(a->wait_all(sent, 4, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(fabric.outstanding_requests(0) + fabric.outstanding_requests(1), 0u);
}

TEST_P(BothModes, SizeMismatchFailsBothRequestsNamingBothRanks) {
  InprocFabric fabric(2, with_mode(GetParam()));
  const OpDesc d = desc_with(1);
  int value = 5;
  int64_t big = 0;
  Request send, recv;
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 3, &big, sizeof big, d).ok());
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 3, &value, sizeof value, d).ok());
  Status st = wait_one(fabric.endpoint(1), &recv);
  EXPECT_EQ(st.code(), COLLX_ERR_MISMATCH);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  EXPECT_EQ(wait_one(fabric.endpoint(0), &send).code(), COLLX_ERR_MISMATCH);
  EXPECT_EQ(big, 0) << "mismatched data was delivered";
  EXPECT_EQ(fabric.endpoint(1)->health().code(), COLLX_ERR_MISMATCH);
}

TEST_P(BothModes, OpDescMismatchIsReportedEvenWhenBuffered) {
  InprocFabric fabric(2, with_mode(GetParam()));
  int value = 5, got = 0;
  Request send, recv;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 3, &value, sizeof value, desc_with(10)).ok());
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 3, &got, sizeof got, desc_with(11)).ok());
  Status st = wait_one(fabric.endpoint(1), &recv);
  EXPECT_EQ(st.code(), COLLX_ERR_MISMATCH);
  EXPECT_NE(st.message().find("count 10"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("count 11"), std::string::npos) << st.message();
  EXPECT_EQ(got, 0);
  EXPECT_EQ(fabric.endpoint(0)->health().code(), COLLX_ERR_MISMATCH);
}

TEST_P(BothModes, TimeoutNamesThePendingPeers) {
  InprocFabric fabric(3, with_mode(GetParam()));
  int a = 0, b = 0;
  Request r1, r2;
  ASSERT_TRUE(fabric.endpoint(0)->post_recv(&r1, 2, 1, &a, sizeof a, desc_with(1)).ok());
  ASSERT_TRUE(fabric.endpoint(0)->post_recv(&r2, 1, 1, &b, sizeof b, desc_with(1)).ok());
  int value = 9;
  Request s;
  ASSERT_TRUE(fabric.endpoint(1)->post_send(&s, 0, 1, &value, sizeof value, desc_with(1)).ok());
  Request* both[2] = {&r1, &r2};
  const auto start = std::chrono::steady_clock::now();
  Status st = fabric.endpoint(0)->wait_all(both, 2, Deadline::after_ms(100));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(90));
  EXPECT_EQ(st.code(), COLLX_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("rank 2 "), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("rank 1 "), std::string::npos) << "rank 1 was not pending: " << st.message();
  fabric.endpoint(0)->cancel(both, 2);
}

TEST_P(BothModes, CancelledReceiveIsNeverWritten) {
  InprocFabric fabric(2, with_mode(GetParam()));
  int got = -1;
  Request recv;
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 4, &got, sizeof got, desc_with(1)).ok());
  Request* r = &recv;
  fabric.endpoint(1)->cancel(&r, 1);
  EXPECT_TRUE(recv.done());
  EXPECT_EQ(fabric.outstanding_requests(1), 0u);
  fabric.seal(1);
  int value = 3;
  Request send;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 4, &value, sizeof value, desc_with(1)).ok());
  EXPECT_EQ(got, -1);
  EXPECT_EQ(fabric.unexpected_messages(1), 1u);
  EXPECT_EQ(fabric.seal_violations(), 0u);
  Request* s = &send;
  fabric.endpoint(0)->cancel(&s, 1);
}

TEST_P(BothModes, PoisonWithNotifyFailsPeersAndLaterPosts) {
  InprocFabric fabric(3, with_mode(GetParam()));
  int got = 0;
  Request recv;
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 2, 4, &got, sizeof got, desc_with(1)).ok());
  fabric.endpoint(0)->poison(make_status(COLLX_ERR_SYSTEM, "disk on fire"), true);
  Status st = wait_one(fabric.endpoint(1), &recv);
  EXPECT_EQ(st.code(), COLLX_ERR_REMOTE);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  Request later;
  EXPECT_EQ(fabric.endpoint(0)->post_send(&later, 1, 4, &got, sizeof got, desc_with(1)).code(), COLLX_ERR_SYSTEM);
  EXPECT_TRUE(later.done()) << "a failed post must leave the request untouched";
}

TEST_P(BothModes, AbortWakesAWaiterOnAnotherThread) {
  InprocFabric fabric(2, with_mode(GetParam()));
  int got = 0;
  Request recv;
  ASSERT_TRUE(fabric.endpoint(0)->post_recv(&recv, 1, 4, &got, sizeof got, desc_with(1)).ok());
  Status st;
  std::thread waiter([&] { st = wait_one(fabric.endpoint(0), &recv, -1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fabric.endpoint(0)->abort();
  waiter.join();
  EXPECT_EQ(st.code(), COLLX_ERR_ABORTED);
  EXPECT_EQ(fabric.endpoint(1)->health().code(), COLLX_ERR_REMOTE);
}

TEST_P(BothModes, CloseFailsPeersRequestsThatNeedTheRank) {
  InprocFabric fabric(2, with_mode(GetParam()));
  int got = 0;
  Request recv;
  ASSERT_TRUE(fabric.endpoint(0)->post_recv(&recv, 1, 4, &got, sizeof got, desc_with(1)).ok());
  fabric.endpoint(1)->close(Deadline::after_ms(100));
  Status st = wait_one(fabric.endpoint(0), &recv);
  EXPECT_EQ(st.code(), COLLX_ERR_REMOTE);
  EXPECT_NE(st.message().find("rank 1 left"), std::string::npos) << st.message();
  Request send;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 5, &got, sizeof got, desc_with(1)).ok());
  EXPECT_EQ(wait_one(fabric.endpoint(0), &send).code(), COLLX_ERR_REMOTE);
}

TEST_P(BothModes, ActiveOpCatchesOtherCallsBeforeAnyReceive) {
  for (uint64_t seq : {uint64_t{5}, uint64_t{4}}) {  // same collective, different call; an older one
    InprocFabric fabric(2, with_mode(GetParam()));
    OpDesc active = desc_with(100, 5);
    fabric.endpoint(1)->set_active_op(&active);
    OpDesc other = desc_with(seq == 5 ? 101 : 100, seq);
    int value = 1;
    Request send;
    ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, transport::coll_tag(seq, 0), &value, sizeof value, other).ok());
    EXPECT_EQ(fabric.endpoint(1)->health().code(), COLLX_ERR_MISMATCH) << "seq " << seq;
    EXPECT_EQ(fabric.endpoint(0)->health().code(), COLLX_ERR_MISMATCH) << "seq " << seq;
  }
}

TEST_P(BothModes, ZeroByteMessagesNeedNoBuffer) {
  InprocFabric fabric(2, with_mode(GetParam()));
  Request send, recv;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 1, nullptr, 0, desc_with(0)).ok());
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 1, nullptr, 0, desc_with(0)).ok());
  EXPECT_TRUE(wait_one(fabric.endpoint(1), &recv).ok());
  EXPECT_TRUE(wait_one(fabric.endpoint(0), &send).ok());
}

INSTANTIATE_TEST_SUITE_P(Modes, BothModes, ::testing::Values(SendMode::kEager, SendMode::kRendezvous),
                         [](const ::testing::TestParamInfo<SendMode>& info) {
                           return info.param == SendMode::kEager ? "Eager" : "Rendezvous";
                         });

TEST(Eager, SendCompletesBeforeTheReceiveIsPosted) {
  InprocFabric fabric(2);
  int value = 7, got = 0;
  Request send;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 2, &value, sizeof value, desc_with(1)).ok());
  EXPECT_TRUE(send.done());
  value = 8;  // the message was copied
  EXPECT_EQ(fabric.unexpected_messages(1), 1u);
  Request recv;
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 2, &got, sizeof got, desc_with(1)).ok());
  EXPECT_TRUE(wait_one(fabric.endpoint(1), &recv).ok());
  EXPECT_EQ(got, 7);
}

TEST(Rendezvous, SendWaitsForTheReceiveAndCancelledSendIsNeverRead) {
  InprocFabric fabric(2, with_mode(SendMode::kRendezvous));
  int value = 7;
  Request send;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&send, 1, 2, &value, sizeof value, desc_with(1)).ok());
  EXPECT_EQ(wait_one(fabric.endpoint(0), &send, 30).code(), COLLX_ERR_TIMEOUT);
  Request* s = &send;
  fabric.endpoint(0)->cancel(&s, 1);
  fabric.seal(0);
  int got = 0;
  Request recv;
  ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recv, 0, 2, &got, sizeof got, desc_with(1)).ok());
  EXPECT_EQ(wait_one(fabric.endpoint(1), &recv, 30).code(), COLLX_ERR_TIMEOUT);
  EXPECT_EQ(got, 0);
  EXPECT_EQ(fabric.seal_violations(), 0u);
  Request* r = &recv;
  fabric.endpoint(1)->cancel(&r, 1);
}

TEST(InjectedFailure, FailsTheNthDeliveryAndPoisonsEveryone) {
  InprocFabric fabric(3);
  fabric.fail_delivery(1, 2, make_status(COLLX_ERR_REMOTE, "injected"));
  int v[2] = {1, 2}, got[2] = {};
  Request sends[2], recvs[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(fabric.endpoint(0)->post_send(&sends[i], 1, 9 + i, &v[i], sizeof(int), desc_with(1)).ok());
    ASSERT_TRUE(fabric.endpoint(1)->post_recv(&recvs[i], 0, 9 + i, &got[i], sizeof(int), desc_with(1)).ok());
  }
  EXPECT_TRUE(wait_one(fabric.endpoint(1), &recvs[0]).ok());
  EXPECT_NE(wait_one(fabric.endpoint(1), &recvs[1]).message().find("injected"), std::string::npos);
  EXPECT_EQ(got[1], 0);
  EXPECT_EQ(fabric.endpoint(2)->health().code(), COLLX_ERR_REMOTE);
}

TEST(TagReuse, IsCountedForCollectiveTagsOnly) {
  InprocOptions options;
  options.track_tag_reuse = true;
  InprocFabric fabric(2, options);
  Request s[3];
  const uint64_t tag = transport::coll_tag(3, 5);
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&s[0], 1, tag, nullptr, 0, desc_with(0, 3)).ok());
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&s[1], 1, 77, nullptr, 0, desc_with(0, 3)).ok());
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&s[2], 1, 77, nullptr, 0, desc_with(0, 3)).ok());
  EXPECT_EQ(fabric.tag_reuses(), 0u);
  Request again;
  ASSERT_TRUE(fabric.endpoint(0)->post_send(&again, 1, tag, nullptr, 0, desc_with(0, 3)).ok());
  EXPECT_EQ(fabric.tag_reuses(), 1u);
}

}  // namespace
}  // namespace testing
}  // namespace collx
