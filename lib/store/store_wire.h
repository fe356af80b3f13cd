// The TCP store's wire protocol: framing, encoding and decoding as pure functions over byte
// buffers (no sockets), so the codec can be unit-tested and fuzzed on its own.
//
// Every frame is a 16-byte header followed by a body, all integers little-endian:
//   u32 magic 0x434C5853 ("CLXS") | u16 version | u16 opcode | u32 request id | u32 body bytes
// A reply carries the request's opcode with kReplyFlag set and the request's id. Body fields
// are u32-length-prefixed byte strings, i64 numbers and u32 counts:
//   HELLO          ->                                  reply: u16 server version, challenge
//   SET            -> key, value                       reply: -
//   GET            -> key, i64 timeout ms              reply: value
//   ADD            -> key, i64 delta                   reply: i64 new value
//   COMPARE_SET    -> key, expected, desired           reply: value held afterwards
//   WAIT           -> u32 count, count x key, i64 timeout ms   reply: -
//   DELETE         -> key                              reply: -
//   PING           ->                                  reply: -
//   AUTH           -> client nonce, client MAC         reply: server MAC
// Every reply body starts with i32 status (a collx_status_t) and a message string; the
// payload after them is present only when the status is COLLX_OK. GET and WAIT wait on the
// server until their keys exist (timeout -1 = forever, 0 = do not wait).
//
// Job token (version 2, lib/common/auth.h): the HELLO reply's challenge is the server's
// 32-byte nonce when it requires the token, empty otherwise. The client then sends AUTH with
// its 32-byte nonce and MAC; the server answers with its own MAC, and until then refuses every
// other request. Nonces and MACs are byte strings of exactly 32 bytes.
//
// Decoders check every length against the store limits before allocating anything, never
// read past the input, and answer COLLX_ERR_PROTOCOL with a reason on malformed input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {
namespace store_wire {

constexpr uint32_t kMagic = 0x434C5853;  // "CLXS"
constexpr uint16_t kProtocolVersion = 2;  // 2: job token (AUTH, HELLO challenge)
constexpr size_t kHeaderBytes = 16;
constexpr uint16_t kReplyFlag = 0x8000;
// Longest reply message (a timeout message names one key of up to kStoreMaxKeyBytes).
constexpr size_t kMaxMessageBytes = 16384;

enum class Opcode : uint16_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kAdd = 4,
  kCompareSet = 5,
  kWait = 6,
  kDelete = 7,
  kPing = 8,
  kAuth = 9,
};
const char* opcode_name(Opcode opcode);

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t opcode = 0;  // as sent, kReplyFlag included
  uint32_t request_id = 0;
  uint32_t body_bytes = 0;
};

struct Request {
  Opcode opcode = Opcode::kPing;
  uint32_t request_id = 0;
  std::string key;                // SET, GET, ADD, COMPARE_SET, DELETE
  std::vector<std::string> keys;  // WAIT
  Bytes value;                    // SET: the value; COMPARE_SET: the desired value
  Bytes expected;                 // COMPARE_SET
  int64_t delta = 0;              // ADD
  int64_t timeout_ms = -1;        // GET, WAIT: -1 waits forever
  Bytes nonce;                    // AUTH: the client's nonce
  Bytes mac;                      // AUTH: the client's MAC
};

struct Reply {
  Opcode opcode = Opcode::kPing;
  uint32_t request_id = 0;
  collx_status_t status = COLLX_OK;
  std::string message;
  Bytes value;              // GET, COMPARE_SET
  int64_t new_value = 0;    // ADD
  uint16_t server_version = 0;  // HELLO
  Bytes challenge;              // HELLO: the server's nonce; empty when no token is required
  Bytes mac;                    // AUTH: the server's MAC
};

// Append one frame to *out. Fields must be within the limits the decoder enforces (callers
// validate arguments first); a reply message longer than kMaxMessageBytes is shortened.
void encode_request(const Request& request, Bytes* out);
void encode_reply(const Reply& reply, Bytes* out);

// Decode the header at the start of data[0, size) (size >= kHeaderBytes), checking magic,
// version, opcode and the body length allowed for that opcode.
Status decode_header(const uint8_t* data, size_t size, bool expect_reply, Header* out);

// The size of the frame starting at data (header included) once its header is complete and
// valid; 0 before that or when it is invalid. Lets a reader size its buffer once.
size_t peek_frame_bytes(const uint8_t* data, size_t size, bool expect_reply);

// Decode the frame at the start of data[0, size):
//   OK and *frame_bytes > 0: one frame decoded; it occupied *frame_bytes bytes.
//   OK and *frame_bytes == 0: the frame is incomplete (its header, once complete, is valid).
//   COLLX_ERR_PROTOCOL: malformed; the stream cannot be resynchronized.
Status decode_request(const uint8_t* data, size_t size, Request* out, size_t* frame_bytes);
Status decode_reply(const uint8_t* data, size_t size, Reply* out, size_t* frame_bytes);

}  // namespace store_wire
}  // namespace collx
