#include "transports/tcp/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "transports/tcp/tcp_mesh.h"
#include "transports/tcp/tcp_transport.h"

namespace collx {
namespace tcp {
namespace {

FrameHeader sample_data_header() {
  FrameHeader h;
  h.type = FrameType::kData;
  h.src_rank = 3;
  h.frag_bytes = 4096;
  h.tag = transport::coll_tag(12, 5);
  h.msg_id = 77;
  h.msg_bytes = 1 << 20;
  h.frag_offset = 8192;
  h.desc.kind = 1;
  h.desc.datatype = 7;
  h.desc.op = 2;
  h.desc.algorithm = 3;
  h.desc.root = -1;
  h.desc.count = 262144;
  h.desc.seq = 12;
  return h;
}

TEST(Wire, FrameHeaderRoundTrip) {
  uint8_t buf[kFrameHeaderBytes];
  FrameHeader in = sample_data_header();
  encode_frame_header(in, buf);
  FrameHeader out;
  std::string why;
  ASSERT_TRUE(decode_frame_header(buf, 3, &out, &why)) << why;
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.src_rank, 3);
  EXPECT_EQ(out.frag_bytes, in.frag_bytes);
  EXPECT_EQ(out.tag, in.tag);
  EXPECT_EQ(out.msg_id, in.msg_id);
  EXPECT_EQ(out.msg_bytes, in.msg_bytes);
  EXPECT_EQ(out.frag_offset, in.frag_offset);
  EXPECT_TRUE(out.desc == in.desc);
}

TEST(Wire, FrameHeaderRejectsBadFields) {
  uint8_t buf[kFrameHeaderBytes];
  FrameHeader out;
  std::string why;
  auto expect_reject = [&](FrameHeader h, int expected_src, const char* needle) {
    encode_frame_header(h, buf);
    EXPECT_FALSE(decode_frame_header(buf, expected_src, &out, &why)) << needle;
    EXPECT_NE(why.find(needle), std::string::npos) << why;
  };
  FrameHeader h = sample_data_header();
  expect_reject(h, 2, "source rank");
  h = sample_data_header();
  h.frag_offset = h.msg_bytes - 100;  // fragment runs past the end
  expect_reject(h, 3, "outside its message");
  h = sample_data_header();
  h.frag_offset = ~0ull - 10;  // overflow of offset + bytes must not wrap
  expect_reject(h, 3, "outside its message");
  h = sample_data_header();
  h.msg_bytes = kMaxMessageBytes + 1;
  expect_reject(h, 3, "1 TiB");
  h = sample_data_header();
  h.type = FrameType::kPoison;
  h.frag_bytes = 5000;
  h.msg_bytes = 5000;
  h.frag_offset = 0;
  expect_reject(h, 3, "POISON");
  h = sample_data_header();
  h.type = FrameType::kGoodbye;
  expect_reject(h, 3, "GOODBYE");
  h = sample_data_header();
  h.flags = 0x80;
  expect_reject(h, 3, "flags");

  h = sample_data_header();
  encode_frame_header(h, buf);
  buf[6] = 9;  // type
  EXPECT_FALSE(decode_frame_header(buf, 3, &out, &why));
  EXPECT_NE(why.find("type"), std::string::npos);
  encode_frame_header(h, buf);
  buf[0] ^= 0xff;  // magic
  EXPECT_FALSE(decode_frame_header(buf, 3, &out, &why));
  EXPECT_NE(why.find("magic"), std::string::npos);
  encode_frame_header(h, buf);
  buf[4] = 99;  // version
  EXPECT_FALSE(decode_frame_header(buf, 3, &out, &why));
  EXPECT_NE(why.find("version"), std::string::npos);
}

TEST(Wire, RandomBytesNeverDecodeAsFrames) {
  std::mt19937_64 rng(42);
  uint8_t buf[kFrameHeaderBytes];
  FrameHeader out;
  std::string why;
  for (int i = 0; i < 100000; ++i) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    EXPECT_FALSE(decode_frame_header(buf, 0, &out, &why));
  }
}

TEST(Wire, HelloRoundTripAndChecks) {
  Hello hello;
  hello.comm_id = 0x1234567890abcdefull;
  hello.src_rank = 5;
  hello.dst_rank = 2;
  hello.socket_index = 1;
  hello.sockets_per_peer = 2;
  uint8_t buf[kHelloBytes];
  encode_hello(hello, buf);
  Hello out;
  std::string why;
  ASSERT_TRUE(decode_hello(buf, &out, &why)) << why;
  EXPECT_EQ(out.comm_id, hello.comm_id);
  EXPECT_EQ(out.src_rank, 5);
  EXPECT_EQ(out.dst_rank, 2);
  EXPECT_EQ(out.socket_index, 1u);
  EXPECT_EQ(out.sockets_per_peer, 2u);

  // A byte-swapped magic is reported as a byte-order difference.
  uint32_t swapped = __builtin_bswap32(kHelloMagic);
  std::memcpy(buf, &swapped, 4);
  EXPECT_FALSE(decode_hello(buf, &out, &why));
  EXPECT_NE(why.find("byte order"), std::string::npos) << why;

  MeshParams params;
  params.rank = 2;
  params.size = 8;
  params.comm_id = hello.comm_id;
  params.sockets_per_peer = 2;
  bool fatal = false;
  auto none = [](int, int) { return false; };
  EXPECT_EQ(hello_rejection(hello, params, none, &fatal), "");
  Hello bad = hello;
  bad.comm_id = 1;
  EXPECT_NE(hello_rejection(bad, params, none, &fatal).find("communicator"), std::string::npos);
  bad = hello;
  bad.dst_rank = 3;
  EXPECT_NE(hello_rejection(bad, params, none, &fatal).find("addressed to rank 3"), std::string::npos);
  bad = hello;
  bad.src_rank = 1;  // lower ranks are connected to, they do not connect
  EXPECT_NE(hello_rejection(bad, params, none, &fatal).find("rank 1"), std::string::npos);
  bad = hello;
  bad.src_rank = 8;
  EXPECT_NE(hello_rejection(bad, params, none, &fatal), "");
  bad = hello;
  bad.socket_index = 2;
  EXPECT_NE(hello_rejection(bad, params, none, &fatal).find("socket 2"), std::string::npos);
  EXPECT_NE(hello_rejection(hello, params, [](int, int) { return true; }, &fatal).find("duplicate"), std::string::npos);
  EXPECT_FALSE(fatal);
  bad = hello;
  bad.sockets_per_peer = 4;
  EXPECT_NE(hello_rejection(bad, params, none, &fatal).find("COLLX_TCP_NSOCKS"), std::string::npos);
  EXPECT_TRUE(fatal);
}

TEST(Wire, HelloAckRoundTrip) {
  HelloAck ack;
  ack.comm_id = 99;
  ack.rank = 4;
  ack.sockets_per_peer = 3;
  uint8_t buf[kHelloAckBytes];
  encode_hello_ack(ack, buf);
  HelloAck out;
  std::string why;
  ASSERT_TRUE(decode_hello_ack(buf, &out, &why)) << why;
  EXPECT_EQ(out.comm_id, 99u);
  EXPECT_EQ(out.rank, 4);
  EXPECT_EQ(out.sockets_per_peer, 3u);
  uint8_t hello_bytes[kHelloAckBytes] = {};  // the decoder reads a whole ACK's bytes
  encode_hello(Hello{}, hello_bytes);
  EXPECT_FALSE(decode_hello_ack(hello_bytes, &out, &why));  // a HELLO is no ACK
}

TEST(Wire, ChallengeAndAuthRoundTripAndRejectUnknownFlags) {
  Challenge challenge;
  challenge.token_required = true;
  challenge.nonce.fill(0x11);
  uint8_t challenge_bytes[kChallengeBytes];
  encode_challenge(challenge, challenge_bytes);
  Challenge decoded;
  std::string why;
  ASSERT_TRUE(decode_challenge(challenge_bytes, &decoded, &why)) << why;
  EXPECT_TRUE(decoded.token_required);
  EXPECT_EQ(decoded.nonce, challenge.nonce);
  challenge_bytes[9] = 1;  // an unknown flag bit
  EXPECT_FALSE(decode_challenge(challenge_bytes, &decoded, &why));
  EXPECT_NE(why.find("unknown flags"), std::string::npos) << why;

  AuthAnswer answer;
  answer.has_token = true;
  answer.nonce.fill(0x22);
  answer.mac.fill(0x33);
  uint8_t auth_bytes[kAuthBytes];
  encode_auth(answer, auth_bytes);
  AuthAnswer out;
  ASSERT_TRUE(decode_auth(auth_bytes, &out, &why)) << why;
  EXPECT_TRUE(out.has_token);
  EXPECT_EQ(out.nonce, answer.nonce);
  EXPECT_EQ(out.mac, answer.mac);
  EXPECT_FALSE(decode_challenge(auth_bytes, &decoded, &why));  // an AUTH is no CHALLENGE
  auth_bytes[4] = 1;  // wire version 1
  EXPECT_FALSE(decode_auth(auth_bytes, &out, &why));
  EXPECT_NE(why.find("wire version 1"), std::string::npos) << why;
}

void expect_plan_covers(const std::vector<Fragment>& plan, uint64_t bytes) {
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0].offset, 0u);
  EXPECT_EQ(plan[0].socket, 0);
  uint64_t next = 0;
  for (const auto& f : plan) {
    EXPECT_EQ(f.offset, next);
    if (bytes > 0) {
      EXPECT_GT(f.bytes, 0u);
    }
    next += f.bytes;
  }
  EXPECT_EQ(next, bytes);
}

TEST(Wire, PlanFragments) {
  auto plan = plan_fragments(0, 4, 1024);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].bytes, 0u);

  plan = plan_fragments(1000, 4, 256 << 10);  // below the striping threshold
  ASSERT_EQ(plan.size(), 1u);
  expect_plan_covers(plan, 1000);

  plan = plan_fragments((1 << 20) + 3, 2, 256 << 10);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].socket, 1);
  EXPECT_EQ(plan[1].offset % 4096, 0u);  // page-aligned boundary
  expect_plan_covers(plan, (1 << 20) + 3);

  plan = plan_fragments(64 << 20, 1, 0);  // one socket: never split (below max fragment)
  ASSERT_EQ(plan.size(), 1u);

  plan = plan_fragments(3, 8, 0);  // fewer bytes than sockets
  ASSERT_EQ(plan.size(), 1u);
  expect_plan_covers(plan, 3);

  // Larger than sockets * max fragment: round-robin, offset 0 first on socket 0.
  plan = plan_fragments(10000, 2, 0, 1000);
  ASSERT_EQ(plan.size(), 10u);
  for (size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(plan[i].socket, static_cast<int>(i % 2));
  expect_plan_covers(plan, 10000);

  for (uint64_t bytes : {1ull, 4095ull, 4096ull, 4097ull, 12289ull, 16385ull, 999999ull}) {
    for (int sockets = 1; sockets <= 5; ++sockets) expect_plan_covers(plan_fragments(bytes, sockets, 0), bytes);
  }
}

TEST(TcpSettings, LoadFromEnvironment) {
  ::setenv("COLLX_TCP_NSOCKS", "3", 1);
  ::setenv("COLLX_TCP_STRIPE_MIN", "1M", 1);
  ::setenv("COLLX_UNEXPECTED_MAX", "64K", 1);
  ::setenv("COLLX_SOCKET_IFNAME", "^docker", 1);
  TcpTransportParams params;
  ASSERT_TRUE(load_tcp_settings(&params).ok());
  EXPECT_EQ(params.sockets_per_peer, 3);
  EXPECT_EQ(params.stripe_min_bytes, 1u << 20);
  EXPECT_EQ(params.unexpected_max_bytes, 64u << 10);
  EXPECT_EQ(params.ifname, "^docker");
  ::setenv("COLLX_TCP_NSOCKS", "0", 1);
  Status bad = load_tcp_settings(&params);
  EXPECT_EQ(bad.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(bad.message().find("COLLX_TCP_NSOCKS"), std::string::npos) << bad.message();
  for (const char* name : {"COLLX_TCP_NSOCKS", "COLLX_TCP_STRIPE_MIN", "COLLX_UNEXPECTED_MAX", "COLLX_SOCKET_IFNAME"}) {
    ::unsetenv(name);
  }
  TcpTransportParams defaults;
  ASSERT_TRUE(load_tcp_settings(&defaults).ok());
  EXPECT_EQ(defaults.sockets_per_peer, 2);
  EXPECT_EQ(defaults.stripe_min_bytes, 256u << 10);
  EXPECT_EQ(defaults.unexpected_max_bytes, 256u << 20);
}

}  // namespace
}  // namespace tcp
}  // namespace collx
