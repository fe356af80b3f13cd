// The matcher alone, driven by a fake transport that "moves bytes" by hand: ordering, the
// unexpected budget, cancel, poison naming the peer, mismatch and the active-op check.
#include "transports/common/matcher.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace collx {
namespace transport {
namespace {

constexpr int kRank = 0;
constexpr int kPeer = 1;

// Stands in for a transport: records what the matcher asked of it, poisons like one.
class FakeMover : public MatchHooks {
 public:
  explicit FakeMover(size_t budget) : matcher(kRank, 3, budget, nullptr, *this) {}

  void matcher_poison(const Status& status, bool notify_peers) override {
    if (matcher.begin_poison(status)) notified = notify_peers;
  }
  void matcher_resume(int peer) override { resumed.push_back(peer); }
  void matcher_took_unexpected(InMessage* m) override { took.push_back(m->msg_id); }

  // A message of `peer` announced with its whole payload `data` (eager): what the matcher said.
  Matcher::Arrival arrive(int peer, uint64_t msg_id, uint64_t tag, const std::string& data, const OpDesc& desc = {},
                          bool whole = true) {
    Matcher::Arrival a;
    InMessage* raw = matcher.arrive<InMessage>(peer, msg_id, tag, data.size(), desc, true, false, &a);
    if (raw == nullptr) return a;
    if (whole) deliver_bytes(raw, data);
    return a;
  }
  // The payload of `m` arrives (the transport's byte movement).
  void deliver_bytes(InMessage* m, const std::string& data) {
    if (uint8_t* dst = m->target()) std::memcpy(dst, data.data(), data.size());
    m->received = data.size();
    matcher.message_complete(m);
  }

  Matcher matcher;
  std::vector<int> resumed;
  std::vector<uint64_t> took;
  bool notified = false;
};

std::string text(const std::vector<char>& buf) { return std::string(buf.begin(), buf.end()); }

TEST(MatcherTest, ReceivesTakeMessagesOfOneTagInSendOrderWhicheverComesFirst) {
  FakeMover t(1 << 20);
  Request r1, r2, r3;
  std::vector<char> b1(3), b2(3), b3(3);
  ASSERT_TRUE(t.matcher.post_recv(&r1, kPeer, 7, b1.data(), 3, {}, false).ok());
  EXPECT_EQ(t.arrive(kPeer, 1, 7, "one"), Matcher::Arrival::kMatched);
  EXPECT_EQ(t.arrive(kPeer, 2, 7, "two"), Matcher::Arrival::kUnexpected);
  EXPECT_EQ(t.arrive(kPeer, 3, 7, "six"), Matcher::Arrival::kUnexpected);
  ASSERT_TRUE(t.matcher.post_recv(&r2, kPeer, 7, b2.data(), 3, {}, false).ok());
  ASSERT_TRUE(t.matcher.post_recv(&r3, kPeer, 7, b3.data(), 3, {}, false).ok());
  ASSERT_TRUE(r1.done() && r2.done() && r3.done());
  EXPECT_EQ(text(b1), "one");
  EXPECT_EQ(text(b2), "two");
  EXPECT_EQ(text(b3), "six");
  EXPECT_EQ(t.matcher.unexpected_bytes(), 0u);
  EXPECT_EQ(t.matcher.completions(), 3u);
}

TEST(MatcherTest, TagsAndPeersMatchApart) {
  FakeMover t(1 << 20);
  Request r;
  std::vector<char> b(1);
  ASSERT_TRUE(t.matcher.post_recv(&r, kPeer, 5, b.data(), 1, {}, false).ok());
  EXPECT_EQ(t.arrive(kPeer, 1, 6, "x"), Matcher::Arrival::kUnexpected);  // other tag
  EXPECT_EQ(t.arrive(2, 1, 5, "y"), Matcher::Arrival::kUnexpected);      // other peer
  EXPECT_FALSE(r.done());
  EXPECT_EQ(t.arrive(kPeer, 2, 5, "z"), Matcher::Arrival::kMatched);
  EXPECT_EQ(text(b), "z");
}

TEST(MatcherTest, AReceiveTakingAMessageStillArrivingGetsItsBytesWhenItCompletes) {
  FakeMover t(1 << 20);
  EXPECT_EQ(t.arrive(kPeer, 1, 7, "late", {}, /*whole=*/false), Matcher::Arrival::kUnexpected);
  Request r;
  std::vector<char> b(4);
  ASSERT_TRUE(t.matcher.post_recv(&r, kPeer, 7, b.data(), 4, {}, false).ok());
  EXPECT_EQ(t.took, std::vector<uint64_t>{1});  // the transport was told to fetch the rest
  EXPECT_FALSE(r.done());
  t.deliver_bytes(t.matcher.find(kPeer, 1), "late");
  ASSERT_TRUE(r.done());
  EXPECT_EQ(text(b), "late");
  EXPECT_EQ(t.matcher.find(kPeer, 1), nullptr);
}

TEST(MatcherTest, AFullBudgetPausesTheAnnouncementUntilAReceiveIsPostedOrBudgetFreed) {
  FakeMover t(6);
  EXPECT_EQ(t.arrive(kPeer, 1, 1, "four"), Matcher::Arrival::kUnexpected);
  EXPECT_EQ(t.matcher.unexpected_bytes(), 4u);
  EXPECT_EQ(t.arrive(kPeer, 2, 2, "four"), Matcher::Arrival::kPaused);
  EXPECT_TRUE(t.matcher.paused(kPeer));
  // A receive for the paused peer resumes it, and then the announcement matches it.
  Request r2;
  std::vector<char> b2(4);
  ASSERT_TRUE(t.matcher.post_recv(&r2, kPeer, 2, b2.data(), 4, {}, false).ok());
  EXPECT_EQ(t.resumed, std::vector<int>{kPeer});
  EXPECT_EQ(t.arrive(kPeer, 2, 2, "four"), Matcher::Arrival::kMatched);
  EXPECT_FALSE(t.matcher.paused(kPeer));
  // Paused again; consuming the buffered message frees budget and resumes it.
  EXPECT_EQ(t.arrive(kPeer, 3, 3, "more"), Matcher::Arrival::kPaused);
  Request r1;
  std::vector<char> b1(4);
  ASSERT_TRUE(t.matcher.post_recv(&r1, kPeer, 1, b1.data(), 4, {}, false).ok());
  EXPECT_EQ(t.resumed.size(), 2u);
  EXPECT_EQ(t.matcher.unexpected_bytes(), 0u);
  EXPECT_EQ(t.arrive(kPeer, 3, 3, "more"), Matcher::Arrival::kUnexpected);
}

TEST(MatcherTest, ALeavingPeerIsTakenBudgetOrNot) {
  FakeMover t(2);
  Matcher::Arrival how;
  EXPECT_NE(t.matcher.arrive<InMessage>(kPeer, 1, 1, 100, {}, true, /*ignore_budget=*/true, &how), nullptr);
  EXPECT_EQ(how, Matcher::Arrival::kUnexpected);
  // A rendezvous message is not staged here: no budget needed.
  EXPECT_NE(t.matcher.arrive<InMessage>(kPeer, 2, 1, 100, {}, /*staged=*/false, false, &how), nullptr);
  EXPECT_EQ(how, Matcher::Arrival::kUnexpected);
  EXPECT_EQ(t.matcher.unexpected_bytes(), 100u);
}

TEST(MatcherTest, CancelForgetsAPostedReceiveAndDetachesOneWithAMessageInProgress) {
  FakeMover t(1 << 20);
  Request posted, partial;
  std::vector<char> b(4, '-');
  ASSERT_TRUE(t.matcher.post_recv(&posted, kPeer, 1, b.data(), 4, {}, false).ok());
  t.matcher.cancel_recv(&posted, make_status(COLLX_ERR_ABORTED, "cancelled"));
  ASSERT_TRUE(posted.failed());
  EXPECT_EQ(posted.status().code(), COLLX_ERR_ABORTED);
  // The next message of that tag is unexpected: the cancelled receive is gone.
  EXPECT_EQ(t.arrive(kPeer, 1, 1, "abcd", {}, false), Matcher::Arrival::kUnexpected);
  ASSERT_TRUE(t.matcher.post_recv(&partial, kPeer, 1, b.data(), 4, {}, false).ok());
  t.matcher.cancel_recv(&partial, make_status(COLLX_ERR_ABORTED, "cancelled"));
  ASSERT_TRUE(partial.failed());
  EXPECT_EQ(t.matcher.unexpected_bytes(), 0u);
  // The rest of its payload arrives and goes nowhere.
  InMessage* m = t.matcher.find(kPeer, 1);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->target(), nullptr);
  t.deliver_bytes(m, "abcd");
  EXPECT_EQ(text(b), "----");
  EXPECT_EQ(t.matcher.find(kPeer, 1), nullptr);
}

TEST(MatcherTest, ASizeOrOpMismatchFailsThePostAndPoisonsNamingBothSides) {
  FakeMover t(1 << 20);
  OpDesc sent;
  sent.count = 4;
  EXPECT_EQ(t.arrive(kPeer, 1, 1, "abcd", sent), Matcher::Arrival::kUnexpected);
  Request r;
  std::vector<char> b(8, '-');
  OpDesc posted;
  posted.count = 8;
  Status status = t.matcher.post_recv(&r, kPeer, 1, b.data(), 8, posted, false);
  EXPECT_EQ(status.code(), COLLX_ERR_MISMATCH);
  EXPECT_NE(status.message().find("receiving 8 bytes from rank 1"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("[4 bytes]"), std::string::npos) << status.message();
  EXPECT_EQ(t.matcher.poison().code(), COLLX_ERR_MISMATCH);
  EXPECT_TRUE(t.notified);
  EXPECT_EQ(text(b), "--------");  // no byte reached the buffer

  // And the other way round: an announcement meeting a posted receive of another size.
  FakeMover u(1 << 20);
  Request r2;
  ASSERT_TRUE(u.matcher.post_recv(&r2, kPeer, 1, b.data(), 8, {}, false).ok());
  EXPECT_EQ(u.arrive(kPeer, 1, 1, "abcd"), Matcher::Arrival::kFailed);
  ASSERT_TRUE(r2.failed());
  EXPECT_EQ(r2.status().code(), COLLX_ERR_MISMATCH);
}

TEST(MatcherTest, AMessageOfAnotherCollectiveAtTheActiveSequencePoisonsEvenWhenBuffered) {
  OpDesc running;
  running.kind = 1;
  running.seq = 5;
  OpDesc other = running;
  other.kind = 2;
  const uint64_t tag = coll_tag(5, 0);
  FakeMover t(1 << 20);
  EXPECT_EQ(t.arrive(kPeer, 1, tag, "x", other), Matcher::Arrival::kUnexpected);  // no collective yet
  t.matcher.set_active(&running, true);
  EXPECT_EQ(t.matcher.poison().code(), COLLX_ERR_MISMATCH);

  FakeMover u(1 << 20);
  u.matcher.set_active(&running, true);
  EXPECT_EQ(u.arrive(kPeer, 1, tag, "x", other), Matcher::Arrival::kFailed);
  EXPECT_NE(u.matcher.poison().message().find("rank 1 sent"), std::string::npos) << u.matcher.poison().message();
  // Point-to-point tags are never checked against the collective.
  FakeMover v(1 << 20);
  v.matcher.set_active(&running, true);
  EXPECT_EQ(v.arrive(kPeer, 1, 9, "x", other), Matcher::Arrival::kUnexpected);
}

TEST(MatcherTest, APausedAnnouncementIsCheckedAgainstALaterCollective) {
  OpDesc running;
  running.seq = 5;
  OpDesc older;
  older.seq = 4;
  FakeMover t(0);
  EXPECT_EQ(t.arrive(kPeer, 1, coll_tag(4, 0), "x", older), Matcher::Arrival::kPaused);
  t.matcher.set_active(&running, true);
  EXPECT_EQ(t.matcher.poison().code(), COLLX_ERR_MISMATCH);
}

TEST(MatcherTest, AFailedPeerFailsItsReceivesNamingItAndKeepsCompleteMessagesReceivable) {
  FakeMover t(1 << 20);
  Request posted, partial, other;
  std::vector<char> b(4), c(4), d(4);
  ASSERT_TRUE(t.matcher.post_recv(&posted, kPeer, 1, b.data(), 4, {}, false).ok());
  ASSERT_TRUE(t.matcher.post_recv(&other, 2, 1, d.data(), 4, {}, false).ok());
  EXPECT_EQ(t.arrive(kPeer, 1, 2, "half", {}, false), Matcher::Arrival::kUnexpected);
  ASSERT_TRUE(t.matcher.post_recv(&partial, kPeer, 2, c.data(), 4, {}, false).ok());
  EXPECT_EQ(t.arrive(kPeer, 2, 3, "done"), Matcher::Arrival::kUnexpected);
  Matcher::Arrival how;
  InMessage* elsewhere = t.matcher.arrive<InMessage>(kPeer, 3, 5, 4, {}, false, false, &how);
  ASSERT_NE(elsewhere, nullptr);
  elsewhere->fetchable = true;  // its payload waits in the transport (ucx)
  t.matcher.fail_peer(kPeer, make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", kPeer));
  ASSERT_TRUE(posted.failed() && partial.failed());
  EXPECT_EQ(posted.status().message(), "rank 1 left the communicator");
  EXPECT_FALSE(other.done());  // another peer's receive is untouched
  EXPECT_EQ(t.matcher.find(kPeer, 1), nullptr);
  EXPECT_EQ(t.matcher.find(kPeer, 3), elsewhere);
  // What it sent completely is still delivered; a receive nothing can satisfy fails.
  Request late, never;
  std::vector<char> e(4);
  ASSERT_TRUE(t.matcher.post_recv(&late, kPeer, 3, e.data(), 4, {}, true).ok());
  ASSERT_TRUE(late.done() && !late.failed());
  EXPECT_EQ(text(e), "done");
  Status status = t.matcher.post_recv(&never, kPeer, 4, e.data(), 4, {}, true);
  EXPECT_EQ(status.code(), COLLX_ERR_REMOTE);
  EXPECT_NE(status.message().find("rank 1"), std::string::npos);
}

TEST(MatcherTest, TheFirstPoisonStandsAndFailsEveryPeersReceives) {
  FakeMover t(1 << 20);
  Request a, b;
  std::vector<char> buf(1);
  ASSERT_TRUE(t.matcher.post_recv(&a, 1, 1, buf.data(), 1, {}, false).ok());
  ASSERT_TRUE(t.matcher.post_recv(&b, 2, 1, buf.data(), 1, {}, false).ok());
  EXPECT_TRUE(t.matcher.begin_poison(make_status(COLLX_ERR_REMOTE, "rank 2 died (pid 42 exited)")));
  EXPECT_FALSE(t.matcher.begin_poison(make_status(COLLX_ERR_TIMEOUT, "later")));
  ASSERT_TRUE(a.failed() && b.failed());
  EXPECT_EQ(a.status().message(), "rank 2 died (pid 42 exited)");
  EXPECT_EQ(t.matcher.poison().message(), "rank 2 died (pid 42 exited)");
  EXPECT_TRUE(t.matcher.begin_poison(Status::Ok()) == false);
}

TEST(MatcherTest, SendsToSelfMatchLikeAnyPeer) {
  FakeMover t(1 << 20);
  Request s1, s2, r1, r2;
  ASSERT_TRUE(t.matcher.send_to_self(&s1, kRank, 4, "ab", 2, {}).ok());  // buffered
  EXPECT_TRUE(s1.done() && !s1.failed());
  std::vector<char> b1(2), b2(2);
  ASSERT_TRUE(t.matcher.post_recv(&r1, kRank, 4, b1.data(), 2, {}, false).ok());
  ASSERT_TRUE(t.matcher.post_recv(&r2, kRank, 4, b2.data(), 2, {}, false).ok());
  ASSERT_TRUE(t.matcher.send_to_self(&s2, kRank, 4, "cd", 2, {}).ok());  // straight into r2
  EXPECT_EQ(text(b1), "ab");
  EXPECT_EQ(text(b2), "cd");
  EXPECT_EQ(t.matcher.unexpected_bytes(), 0u);
}

}  // namespace
}  // namespace transport
}  // namespace collx
