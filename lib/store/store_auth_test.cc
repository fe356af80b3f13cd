// The job token on the TCP store: with the right token everything works; a client without
// it, with a wrong one, or a raw socket sending well-formed requests cannot read or write a
// key, and is dropped with a warning before any request is processed; a token on the client
// only is refused too (the server could be anyone's).
#include <gtest/gtest.h>

#include <thread>

#include "lib/common/auth.h"
#include "lib/store/tcp_store_test_helpers.h"

namespace collx {
namespace store_testing {
namespace {

constexpr const char* kToken = "job-4f1d-secret";

class StoreAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!auth::available()) GTEST_SKIP() << "built without OpenSSL: no job token";
    ASSERT_TRUE(start_tcp_store_server("127.0.0.1:0", kToken, &server_).ok());
    address_ = "127.0.0.1:" + std::to_string(server_->port());
    ASSERT_TRUE(connect_tcp_store(address_, kToken, Deadline::after_ms(10000), &good_).ok());
    ASSERT_TRUE(good_->set("secret", bytes_of("value")).ok());
  }
  Status connect_with(const std::string& token) {
    std::shared_ptr<Store> store;
    return connect_tcp_store(address_, token, Deadline::after_ms(5000), &store);
  }
  // The job's own client still sees exactly what the job wrote.
  void expect_untouched() {
    Bytes value;
    ASSERT_TRUE(good_->get("secret", &value, Deadline::after_ms(1000)).ok());
    EXPECT_EQ(text_of(value), "value");
    Status missing = good_->get("injected", &value, Deadline::after_ms(0));
    EXPECT_EQ(missing.code(), COLLX_ERR_TIMEOUT) << "an unauthenticated write reached the store";
    expect_store_works(good_.get(), "after the intruder");
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::string address_;
  std::shared_ptr<Store> good_;
};

TEST_F(StoreAuthTest, RightTokenWorks) {
  std::shared_ptr<Store> other;
  ASSERT_TRUE(connect_tcp_store(address_, kToken, Deadline::after_ms(5000), &other).ok());
  Bytes value;
  ASSERT_TRUE(other->get("secret", &value, Deadline::after_ms(1000)).ok());
  EXPECT_EQ(text_of(value), "value");
  expect_store_works(other.get(), "second client");
}

TEST_F(StoreAuthTest, ClientWithoutTokenIsToldToSetIt) {
  Status status = connect_with("");
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(status.message().find("requires the job token"), std::string::npos) << status.message();
  expect_untouched();
}

TEST_F(StoreAuthTest, WrongTokenIsRefusedAndLogged) {
  CapturedLog log;
  Status status = connect_with("job-4f1d-secreT");
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(status.message().find("wrong job token"), std::string::npos) << status.message();
  std::string text;
  for (int i = 0; i < 100 && text.find("wrong job token") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = log.text();
  }
  EXPECT_NE(text.find("WARN STORE"), std::string::npos) << text;
  expect_untouched();
}

TEST_F(StoreAuthTest, ServerWithoutTokenIsRefusedByClientWithOne) {
  std::unique_ptr<TcpStoreServer> open_server;
  ASSERT_TRUE(start_tcp_store_server("127.0.0.1:0", "", &open_server).ok());
  std::shared_ptr<Store> store;
  Status status = connect_tcp_store("127.0.0.1:" + std::to_string(open_server->port()), kToken,
                                    Deadline::after_ms(5000), &store);
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(status.message().find("does not use a job token"), std::string::npos) << status.message();
}

// A raw socket that skips the handshake: its well-formed SET and GET are never processed.
TEST_F(StoreAuthTest, RawRequestsBeforeAuthAreDropped) {
  RawClient raw(server_->port());
  Bytes frames = frame_of(make_request(Opcode::kSet, 1, "injected", "evil"));
  Bytes get = frame_of(make_request(Opcode::kGet, 2, "secret"));
  frames.insert(frames.end(), get.begin(), get.end());
  raw.send_bytes(frames);
  Reply reply;
  ASSERT_TRUE(raw.read_final_reply(&reply)) << "the server kept an unauthenticated client or sent more than a refusal";
  EXPECT_EQ(reply.status, COLLX_ERR_PROTOCOL);
  EXPECT_NE(reply.message.find("before authenticating"), std::string::npos) << reply.message;
  expect_untouched();
}

// HELLO, then a guessed AUTH and a SET in one write: the SET is never processed.
TEST_F(StoreAuthTest, GuessedMacIsDroppedWithWhatFollows) {
  RawClient raw(server_->port());
  raw.send_bytes(frame_of(make_request(Opcode::kHello, 1)));
  Reply hello;
  ASSERT_TRUE(raw.read_reply(&hello));
  ASSERT_EQ(hello.challenge.size(), auth::kNonceBytes);
  Request guess = make_request(Opcode::kAuth, 2);
  guess.nonce.assign(auth::kNonceBytes, 7);
  guess.mac.assign(auth::kMacBytes, 0);
  Bytes frames = frame_of(guess);
  Bytes set = frame_of(make_request(Opcode::kSet, 3, "injected", "evil"));
  frames.insert(frames.end(), set.begin(), set.end());
  raw.send_bytes(frames);
  Reply refused;
  ASSERT_TRUE(raw.read_reply(&refused));
  EXPECT_EQ(refused.status, COLLX_ERR_PROTOCOL);
  EXPECT_NE(refused.message.find("wrong job token"), std::string::npos) << refused.message;
  Bytes rest;
  EXPECT_TRUE(raw.read_until_closed(&rest));
  EXPECT_TRUE(rest.empty());
  expect_untouched();
}

// A client of another protocol version is still told so, token or not.
TEST_F(StoreAuthTest, VersionMismatchIsStillReported) {
  RawClient raw(server_->port());
  Bytes old_hello = frame_of(make_request(Opcode::kHello, 9));
  old_hello[4] = 1;  // version 1: no job token support
  raw.send_bytes(old_hello);
  Reply reply;
  ASSERT_TRUE(raw.read_final_reply(&reply));
  EXPECT_NE(reply.message.find("unsupported store protocol version 1"), std::string::npos) << reply.message;
}

}  // namespace
}  // namespace store_testing
}  // namespace collx
