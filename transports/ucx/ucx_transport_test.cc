// The UCX transport with ranks as threads of this process, what only UCX does: send to self,
// cancelling an announced send, poison releasing send buffers, bad arguments. Without UCX in
// the build: the clear UNSUPPORTED status. What every transport does (sizes, ordering,
// mismatches, cancel, timeouts, poison, abort, close) is in transports/conformance.
#include <gtest/gtest.h>

#include <atomic>

#include "transports/ucx/ucx_test_util.h"

namespace collx {
namespace ucx_test {
namespace {

#ifndef COLLX_HAVE_UCX
TEST(UcxThreads, UnsupportedWithoutUcx) {
  testing::BoardBootstrap boot(std::make_shared<testing::Board>(1), 0);
  TransportPtr t;
  Status s = create_ucx_transport(ucx_params(0, 1, 1, &boot), &t);
  EXPECT_EQ(s.code(), COLLX_ERR_UNSUPPORTED);
  EXPECT_NE(s.message().find("built without UCX"), std::string::npos) << s.message();
}
#else

OpDesc p2p() { return OpDesc{}; }

TEST(UcxThreads, SendToSelf) {
  run_job(1, [](int, transport::Transport* t) {
    for (size_t bytes : {size_t{5}, size_t{100000}}) {
      std::vector<uint8_t> out(bytes), in(bytes);
      fill(out, bytes);
      Request s, r;
      ASSERT_TRUE(t->post_send(&s, 0, 1, out.data(), bytes, p2p()).ok());
      ASSERT_TRUE(t->post_recv(&r, 0, 1, in.data(), bytes, p2p()).ok());
      Request* both[] = {&s, &r};
      Status st = t->wait_all(both, 2, Deadline::after_ms(10000));
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(first_bad(in, bytes), -1);
    }
    t->close(Deadline::after_ms(2000));
  });
}

// Cancelling an announced send breaks the stream: the sender poisons itself and the
// receiver is told.
TEST(UcxThreads, CancelAnnouncedSendPoisons) {
  run_job(2, [](int rank, transport::Transport* t) {
    std::vector<uint8_t> buf(1 << 20);
    Request r;
    if (rank == 0) {
      ASSERT_TRUE(t->post_send(&r, 1, 1, buf.data(), buf.size(), p2p()).ok());
      Request* rs[] = {&r};
      t->cancel(rs, 1);
      EXPECT_TRUE(r.done() && r.failed());
      EXPECT_EQ(t->health().code(), COLLX_ERR_ABORTED);
    } else {
      ASSERT_TRUE(t->post_recv(&r, 0, 2, buf.data(), 4, p2p()).ok());  // another tag: never matched
      Status s = wait_one(t, &r, 5000);
      EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
      EXPECT_NE(s.message().find("rank 0 failed"), std::string::npos) << s.message();
    }
  });
}

// Poisoning fails a large send its receiver never took and makes UCX let go of the buffer,
// which is freed at once (ASan builds check nothing touches it); the receiver, waiting on
// another tag, is told.
TEST(UcxThreads, PoisonReleasesPendingSendBuffers) {
  run_job(2, [&](int rank, transport::Transport* t) {
    if (rank == 0) {
      auto buf = std::make_unique<std::vector<uint8_t>>(8u << 20, 7);
      Request r;
      ASSERT_TRUE(t->post_send(&r, 1, 1, buf->data(), buf->size(), p2p()).ok());
      EXPECT_EQ(wait_one(t, &r, 200).code(), COLLX_ERR_TIMEOUT);  // announced, data not taken
      t->poison(make_status(COLLX_ERR_INTERNAL, "local failure"), true);
      EXPECT_TRUE(r.done() && r.failed());
      buf.reset();
      return;
    }
    uint8_t word[8];
    Request r;
    ASSERT_TRUE(t->post_recv(&r, 0, 2, word, sizeof word, p2p()).ok());
    Status s = wait_one(t, &r, 10000);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_NE(s.message().find("rank 0 failed: COLLX_ERR_INTERNAL: local failure"), std::string::npos) << s.message();
  });
}

TEST(UcxThreads, BadArguments) {
  run_job(1, [](int, transport::Transport* t) {
    uint8_t buf[4] = {};
    Request r;
    EXPECT_EQ(t->post_send(&r, 1, 0, buf, 4, p2p()).code(), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(t->post_recv(&r, 0, 0, nullptr, 4, p2p()).code(), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(t->post_send(nullptr, 0, 0, buf, 4, p2p()).code(), COLLX_ERR_INVALID_ARG);
  });
  TransportPtr t;
  UcxTransportParams p;
  EXPECT_EQ(create_ucx_transport(p, &t).code(), COLLX_ERR_INVALID_ARG);  // no bootstrap
}
#endif

}  // namespace
}  // namespace ucx_test
}  // namespace collx
