// The store wire codec: round trips, and rejection of every kind of malformed input
// without crashing, over-reading or allocating for lengths the input does not back.
#include "lib/store/store_wire.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace collx {
namespace store_wire {
namespace {

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }

std::vector<Request> sample_requests() {
  std::vector<Request> requests;
  Request r;
  r.opcode = Opcode::kHello;
  r.request_id = 1;
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kSet;
  r.request_id = 2;
  r.key = "w0/rank/3";
  r.value = bytes_of(std::string("binary\0value", 12));
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kGet;
  r.request_id = 3;
  r.key = "k";
  r.timeout_ms = 1500;
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kAdd;
  r.request_id = 4;
  r.key = "counter";
  r.delta = -9000000000LL;
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kCompareSet;
  r.request_id = 5;
  r.key = "leader";
  r.expected = bytes_of("old");
  r.value = bytes_of("new");
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kWait;
  r.request_id = 6;
  r.keys = {"a", "", "c/d"};
  r.timeout_ms = -1;
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kDelete;
  r.request_id = 7;
  r.key = "gone";
  requests.push_back(r);
  r = Request();
  r.opcode = Opcode::kPing;
  r.request_id = 0xffffffffu;
  requests.push_back(r);
  return requests;
}

Bytes encoded(const Request& request) {
  Bytes out;
  encode_request(request, &out);
  return out;
}

void put_u32(Bytes* frame, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i) (*frame)[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

Status decode_whole(const Bytes& frame, Request* out) {
  size_t frame_bytes = 0;
  Status status = decode_request(frame.data(), frame.size(), out, &frame_bytes);
  if (status.ok() && frame_bytes != frame.size())
    return make_status(COLLX_ERR_INTERNAL, "decoded %zu of %zu bytes", frame_bytes, frame.size());
  return status;
}

TEST(StoreWireTest, EveryRequestRoundTrips) {
  for (const Request& request : sample_requests()) {
    SCOPED_TRACE(opcode_name(request.opcode));
    Bytes frame = encoded(request);
    Request decoded;
    Status status = decode_whole(frame, &decoded);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(decoded.opcode, request.opcode);
    EXPECT_EQ(decoded.request_id, request.request_id);
    EXPECT_EQ(decoded.key, request.key);
    EXPECT_EQ(decoded.keys, request.keys);
    EXPECT_EQ(decoded.value, request.value);
    EXPECT_EQ(decoded.expected, request.expected);
    EXPECT_EQ(decoded.delta, request.delta);
    if (request.opcode == Opcode::kGet || request.opcode == Opcode::kWait) {
      EXPECT_EQ(decoded.timeout_ms, request.timeout_ms);
    }
  }
}

TEST(StoreWireTest, EveryReplyRoundTripsAndErrorsCarryNoPayload) {
  for (Opcode opcode : {Opcode::kHello, Opcode::kSet, Opcode::kGet, Opcode::kAdd, Opcode::kCompareSet,
                        Opcode::kWait, Opcode::kDelete, Opcode::kPing}) {
    SCOPED_TRACE(opcode_name(opcode));
    Reply reply;
    reply.opcode = opcode;
    reply.request_id = 77;
    reply.server_version = kProtocolVersion;
    reply.value = bytes_of("payload");
    reply.new_value = -5;
    Bytes frame;
    encode_reply(reply, &frame);
    Reply decoded;
    size_t frame_bytes = 0;
    ASSERT_TRUE(decode_reply(frame.data(), frame.size(), &decoded, &frame_bytes).ok());
    ASSERT_EQ(frame_bytes, frame.size());
    EXPECT_EQ(decoded.opcode, opcode);
    EXPECT_EQ(decoded.request_id, 77u);
    EXPECT_EQ(decoded.status, COLLX_OK);
    if (opcode == Opcode::kGet || opcode == Opcode::kCompareSet) {
      EXPECT_EQ(decoded.value, reply.value);
    }
    if (opcode == Opcode::kAdd) {
      EXPECT_EQ(decoded.new_value, -5);
    }
    if (opcode == Opcode::kHello) {
      EXPECT_EQ(decoded.server_version, kProtocolVersion);
    }

    reply.status = COLLX_ERR_TIMEOUT;
    reply.message = "store get timed out after 5 ms; missing key 'k'";
    Bytes error_frame;
    encode_reply(reply, &error_frame);
    ASSERT_TRUE(decode_reply(error_frame.data(), error_frame.size(), &decoded, &frame_bytes).ok());
    EXPECT_EQ(decoded.status, COLLX_ERR_TIMEOUT);
    EXPECT_EQ(decoded.message, reply.message);
    EXPECT_TRUE(decoded.value.empty());
  }
}

TEST(StoreWireTest, EveryProperPrefixIsIncompleteNotAnError) {
  for (const Request& request : sample_requests()) {
    Bytes frame = encoded(request);
    for (size_t size = 0; size < frame.size(); ++size) {
      Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(size));  // exact size: ASan sees over-reads
      Request decoded;
      size_t frame_bytes = 1;
      Status status = decode_request(prefix.data(), prefix.size(), &decoded, &frame_bytes);
      ASSERT_TRUE(status.ok()) << opcode_name(request.opcode) << " prefix " << size << ": " << status.message();
      ASSERT_EQ(frame_bytes, 0u);
    }
  }
}

TEST(StoreWireTest, BackToBackFramesDecodeOneAtATime) {
  Bytes stream;
  for (const Request& request : sample_requests()) {
    Bytes frame = encoded(request);
    stream.insert(stream.end(), frame.begin(), frame.end());
  }
  size_t offset = 0;
  for (const Request& request : sample_requests()) {
    Request decoded;
    size_t frame_bytes = 0;
    ASSERT_TRUE(decode_request(stream.data() + offset, stream.size() - offset, &decoded, &frame_bytes).ok());
    ASSERT_GT(frame_bytes, 0u);
    EXPECT_EQ(decoded.request_id, request.request_id);
    offset += frame_bytes;
  }
  EXPECT_EQ(offset, stream.size());
}

// Each malformed frame must come back as COLLX_ERR_PROTOCOL whose message contains `reason`.
void expect_rejected(const Bytes& frame, const std::string& reason) {
  Request decoded;
  size_t frame_bytes = 0;
  Status status = decode_request(frame.data(), frame.size(), &decoded, &frame_bytes);
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL) << reason;
  EXPECT_NE(status.message().find(reason), std::string::npos) << status.message();
}

TEST(StoreWireTest, HeaderProblemsAreRejected) {
  Request ping;
  ping.opcode = Opcode::kPing;
  Bytes frame = encoded(ping);

  Bytes bad_magic = frame;
  bad_magic[0] ^= 1;
  expect_rejected(bad_magic, "bad magic");

  Bytes bad_version = frame;
  bad_version[4] = 7;
  expect_rejected(bad_version, "unsupported store protocol version 7");

  Bytes unknown_opcode = frame;
  unknown_opcode[6] = 99;
  expect_rejected(unknown_opcode, "unexpected opcode");

  Bytes reply_as_request = frame;
  reply_as_request[7] = 0x80;
  expect_rejected(reply_as_request, "unexpected opcode");
}

TEST(StoreWireTest, OversizedBodyIsRejectedFromTheHeaderAlone) {
  Request set;
  set.opcode = Opcode::kSet;
  set.key = "k";
  Bytes header = encoded(set);
  header.resize(kHeaderBytes);  // no body at all: nothing to allocate from
  put_u32(&header, 12, 0xffffffffu);
  expect_rejected(header, "exceeds the limit");
  // PING carries no body: even one byte is too many.
  Request ping;
  ping.opcode = Opcode::kPing;
  Bytes ping_header = encoded(ping);
  put_u32(&ping_header, 12, 1);
  expect_rejected(ping_header, "exceeds the limit of 0 bytes");
}

TEST(StoreWireTest, FieldLengthsAreCheckedAgainstLimitsAndTheFrame) {
  Request set;
  set.opcode = Opcode::kSet;
  set.key = std::string(kStoreMaxKeyBytes + 1, 'k');
  expect_rejected(encoded(set), "key of 4097 bytes exceeds the limit of 4096 bytes");

  set.key = "k";
  set.value = bytes_of("value");
  Bytes frame = encoded(set);
  // The value's length field claims more than the frame holds.
  put_u32(&frame, kHeaderBytes + 4 + 1, 1000);
  expect_rejected(frame, "runs past the end of the frame");

  // Bytes left over after the last field.
  Bytes trailing = encoded(set);
  trailing.push_back(0);
  put_u32(&trailing, 12, static_cast<uint32_t>(trailing.size() - kHeaderBytes));
  expect_rejected(trailing, "unexpected bytes after the last field");

  // A body that ends inside a fixed-size field.
  Request get;
  get.opcode = Opcode::kGet;
  get.key = "k";
  Bytes short_get = encoded(get);
  short_get.resize(short_get.size() - 3);
  put_u32(&short_get, 12, static_cast<uint32_t>(short_get.size() - kHeaderBytes));
  expect_rejected(short_get, "frame ends inside timeout");
}

TEST(StoreWireTest, WaitKeyCountIsBoundedBeforeAllocating) {
  Request wait;
  wait.opcode = Opcode::kWait;
  wait.keys = {"a"};
  Bytes frame = encoded(wait);
  put_u32(&frame, kHeaderBytes, static_cast<uint32_t>(kStoreMaxWaitKeys + 1));
  expect_rejected(frame, "keys exceed the limit");
  put_u32(&frame, kHeaderBytes, 1000);  // within the limit, but the 17-byte body cannot hold 1000 keys
  expect_rejected(frame, "cannot fit in a body");
}

TEST(StoreWireTest, TimeoutsBelowMinusOneAreRejected) {
  Request get;
  get.opcode = Opcode::kGet;
  get.key = "k";
  get.timeout_ms = -2;
  expect_rejected(encoded(get), "negative timeout");
}

TEST(StoreWireTest, RepliesWithUnknownStatusesAreRejected) {
  Reply reply;
  reply.opcode = Opcode::kSet;
  Bytes frame;
  encode_reply(reply, &frame);
  put_u32(&frame, kHeaderBytes, 12345);
  Reply decoded;
  size_t frame_bytes = 0;
  Status status = decode_reply(frame.data(), frame.size(), &decoded, &frame_bytes);
  EXPECT_EQ(status.code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(status.message().find("unknown status"), std::string::npos) << status.message();
  // A request where a reply is expected.
  Request ping;
  ping.opcode = Opcode::kPing;
  Bytes request_frame = encoded(ping);
  EXPECT_EQ(decode_reply(request_frame.data(), request_frame.size(), &decoded, &frame_bytes).code(),
            COLLX_ERR_PROTOCOL);
}

TEST(StoreWireTest, PeekReportsTheFrameSizeOnceTheHeaderIsIn) {
  Request set;
  set.opcode = Opcode::kSet;
  set.key = "k";
  set.value = Bytes(1000);
  Bytes frame = encoded(set);
  EXPECT_EQ(peek_frame_bytes(frame.data(), kHeaderBytes - 1, false), 0u);
  EXPECT_EQ(peek_frame_bytes(frame.data(), kHeaderBytes, false), frame.size());
  EXPECT_EQ(peek_frame_bytes(frame.data(), kHeaderBytes, true), 0u);  // not a reply
}

// The decoders must survive anything: random bytes, and valid frames with bytes flipped,
// cut short or extended. (ASan/UBSan builds turn any over-read into a failure.)
TEST(StoreWireTest, RandomAndMutatedInputsNeverCrashOrOverRead) {
  std::mt19937 random(20240601);
  std::vector<Bytes> seeds;
  for (const Request& request : sample_requests()) seeds.push_back(encoded(request));
  Reply reply;
  reply.opcode = Opcode::kGet;
  reply.value = bytes_of("v");
  seeds.emplace_back();
  encode_reply(reply, &seeds.back());
  size_t accepted = 0;
  for (int iteration = 0; iteration < 200000; ++iteration) {
    Bytes input;
    if (iteration % 4 == 0) {
      input.resize(random() % 64);
      for (auto& b : input) b = static_cast<uint8_t>(random());
    } else {
      input = seeds[random() % seeds.size()];
      int flips = 1 + static_cast<int>(random() % 4);
      for (int f = 0; f < flips && !input.empty(); ++f) input[random() % input.size()] = static_cast<uint8_t>(random());
      if (random() % 3 == 0) input.resize(random() % (input.size() + 8));
    }
    Request request;
    Reply decoded_reply;
    size_t frame_bytes = 0;
    Status status = decode_request(input.data(), input.size(), &request, &frame_bytes);
    ASSERT_TRUE(status.ok() || status.code() == COLLX_ERR_PROTOCOL);
    ASSERT_LE(frame_bytes, input.size());
    if (status.ok() && frame_bytes > 0) {
      ++accepted;
      // Whatever decodes re-encodes to the same bytes: nothing was half-read.
      Bytes again = encoded(request);
      ASSERT_TRUE(std::equal(again.begin(), again.end(), input.begin()) && again.size() == frame_bytes);
    }
    status = decode_reply(input.data(), input.size(), &decoded_reply, &frame_bytes);
    ASSERT_TRUE(status.ok() || status.code() == COLLX_ERR_PROTOCOL);
    ASSERT_LE(frame_bytes, input.size());
  }
  EXPECT_GT(accepted, 0u);  // the mutations do reach the field decoders
}

// AUTH (job token) fields are exactly 32 bytes: a shorter nonce or MAC is malformed.
TEST(StoreWireTest, AuthFieldsMustBeExactly32Bytes) {
  Request auth;
  auth.opcode = Opcode::kAuth;
  auth.nonce.assign(32, 1);
  auth.mac.assign(32, 2);
  Request decoded;
  size_t frame_bytes = 0;
  Bytes frame = encoded(auth);
  ASSERT_TRUE(decode_request(frame.data(), frame.size(), &decoded, &frame_bytes).ok());
  EXPECT_EQ(decoded.nonce, auth.nonce);
  EXPECT_EQ(decoded.mac, auth.mac);
  auth.mac.resize(31);
  expect_rejected(encoded(auth), "client MAC of 31 bytes (expected 32)");
}

}  // namespace
}  // namespace store_wire
}  // namespace collx
