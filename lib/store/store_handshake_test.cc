// The server's handshake state machine on its own: what passes before authentication, how
// much input it allows, and which answers authenticate.
#include "lib/store/store_handshake.h"

#include <gtest/gtest.h>

#include <limits>

#include "lib/common/auth.h"

namespace collx {
namespace {

using namespace store_wire;

constexpr const char* kToken = "handshake-test-token";

Bytes frame_of(const Request& request) {
  Bytes out;
  encode_request(request, &out);
  return out;
}

Request request_of(Opcode opcode, const std::string& key = "") {
  Request request;
  request.opcode = opcode;
  request.key = key;
  return request;
}

// The AUTH a client that knows `token` sends for `challenge`.
Request auth_for(const std::string& token, const Bytes& challenge) {
  auth::Nonce server{}, client{};
  std::copy(challenge.begin(), challenge.end(), server.begin());
  client.fill(5);
  auth::Mac mac{};
  EXPECT_TRUE(auth::compute_mac(token, server, client, auth::Role::kClient, &mac).ok());
  Request request = request_of(Opcode::kAuth);
  request.nonce.assign(client.begin(), client.end());
  request.mac.assign(mac.begin(), mac.end());
  return request;
}

class StoreHandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!auth::available()) GTEST_SKIP() << "built without OpenSSL: no job token";
  }
  // HELLO answered: the challenge it carried.
  Bytes hello(StoreHandshake* handshake) {
    Reply reply;
    bool answered = false;
    Status status = handshake->on_request(request_of(Opcode::kHello), &reply, &answered);
    EXPECT_TRUE(status.ok()) << status.message();
    EXPECT_TRUE(answered);
    EXPECT_EQ(reply.challenge.size(), auth::kNonceBytes);
    return reply.challenge;
  }
};

TEST_F(StoreHandshakeTest, OnlyHelloThenAuthPassTheHeaderScreen) {
  StoreHandshake handshake(kToken);
  EXPECT_FALSE(handshake.authenticated());
  for (Opcode opcode : {Opcode::kSet, Opcode::kGet, Opcode::kAdd, Opcode::kCompareSet, Opcode::kWait,
                        Opcode::kDelete, Opcode::kPing}) {
    const Bytes frame = frame_of(request_of(opcode, "k"));
    Status status = handshake.screen(frame.data(), kHeaderBytes);  // the header alone decides
    EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL) << opcode_name(opcode);
    EXPECT_NE(status.message().find(std::string(opcode_name(opcode)) + " before authenticating"), std::string::npos)
        << status.message();
  }
  const Bytes hello_frame = frame_of(request_of(Opcode::kHello));
  EXPECT_TRUE(handshake.screen(hello_frame.data(), hello_frame.size()).ok());
  EXPECT_TRUE(handshake.screen(hello_frame.data(), kHeaderBytes - 1).ok());  // incomplete: wait
  hello(&handshake);
  EXPECT_EQ(handshake.screen(hello_frame.data(), hello_frame.size()).code(), COLLX_ERR_PROTOCOL);  // second HELLO
}

TEST_F(StoreHandshakeTest, InputRoomIsTheHandshakeUntilAuthenticated) {
  StoreHandshake handshake(kToken);
  EXPECT_EQ(StoreHandshake::kMaxInputBytes, frame_of(request_of(Opcode::kHello)).size() +
                                                frame_of(auth_for(kToken, Bytes(auth::kNonceBytes, 1))).size());
  EXPECT_EQ(handshake.input_room(0), StoreHandshake::kMaxInputBytes);
  EXPECT_EQ(handshake.input_room(100), StoreHandshake::kMaxInputBytes - 100);
  EXPECT_EQ(handshake.input_room(StoreHandshake::kMaxInputBytes + 5), 0u);
  Reply reply;
  bool answered = false;
  ASSERT_TRUE(handshake.on_request(auth_for(kToken, hello(&handshake)), &reply, &answered).ok());
  EXPECT_TRUE(handshake.authenticated());
  EXPECT_EQ(reply.mac.size(), auth::kMacBytes);
  EXPECT_EQ(handshake.input_room(1 << 30), std::numeric_limits<size_t>::max());
  EXPECT_TRUE(handshake.on_request(request_of(Opcode::kSet, "k"), &reply, &answered).ok());
  EXPECT_FALSE(answered);  // the server serves it
}

TEST_F(StoreHandshakeTest, WrongTokenOrStaleChallengeDoesNotAuthenticate) {
  StoreHandshake wrong(kToken);
  Reply reply;
  bool answered = false;
  Status status = wrong.on_request(auth_for("another-token", hello(&wrong)), &reply, &answered);
  EXPECT_NE(status.message().find("wrong job token"), std::string::npos) << status.message();
  EXPECT_FALSE(wrong.authenticated());

  StoreHandshake replayed(kToken);
  const Bytes challenge = hello(&replayed);
  status = replayed.on_request(auth_for(kToken, Bytes(auth::kNonceBytes, 9)), &reply, &answered);  // not its challenge
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL);
  status = replayed.on_request(auth_for(kToken, challenge), &reply, &answered);  // one answer per challenge
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL) << status.message();
  EXPECT_FALSE(replayed.authenticated());

  StoreHandshake no_hello(kToken);
  status = no_hello.on_request(auth_for(kToken, Bytes(auth::kNonceBytes, 0)), &reply, &answered);
  EXPECT_NE(status.message().find("without a fresh challenge"), std::string::npos) << status.message();
  status = no_hello.on_request(request_of(Opcode::kGet, "k"), &reply, &answered);
  EXPECT_NE(status.message().find("GET before authenticating"), std::string::npos) << status.message();
}

TEST(StoreHandshakeWithoutTokenTest, EverythingPassesAndAuthIsRefused) {
  StoreHandshake handshake("");
  EXPECT_TRUE(handshake.authenticated());
  const Bytes set = frame_of(request_of(Opcode::kSet, "k"));
  EXPECT_TRUE(handshake.screen(set.data(), set.size()).ok());
  Reply reply;
  bool answered = false;
  ASSERT_TRUE(handshake.on_request(request_of(Opcode::kHello), &reply, &answered).ok());
  EXPECT_TRUE(answered);
  EXPECT_TRUE(reply.challenge.empty());
  EXPECT_EQ(reply.server_version, kProtocolVersion);
  Request auth = request_of(Opcode::kAuth);
  auth.nonce.assign(32, 1);
  auth.mac.assign(32, 2);
  EXPECT_EQ(handshake.on_request(auth, &reply, &answered).code(), COLLX_ERR_PROTOCOL);
}

}  // namespace
}  // namespace collx
