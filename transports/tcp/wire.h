// The TCP transport's wire format, as pure functions: the connection handshake (HELLO from
// the connecting rank, CHALLENGE back, AUTH from the connecting rank, HELLO_ACK back), the
// fixed-size frame header that precedes every payload, and the plan that splits a message
// into fragments across a peer's sockets.
//
// CHALLENGE and AUTH carry the job token exchange (lib/common/auth.h): the accepting rank's
// nonce, then the connecting rank's nonce and MAC; HELLO_ACK carries the accepting rank's MAC.
// They are exchanged with or without a token (flags say whether one is used), so a token on
// one side only is reported clearly instead of hanging.
//
// Integers travel in host byte order: the handshake carries a byte-order marker so ranks of
// different endianness refuse each other (payloads are host-order numbers anyway).
// Decoders trust nothing: every length is checked before anyone uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/auth.h"
#include "transports/transport.h"

namespace collx {
namespace tcp {

constexpr uint32_t kHelloMagic = 0x48584c43;  // "CLXH" in memory on little-endian hosts
constexpr uint32_t kAckMagic = 0x41584c43;    // "CLXA"
constexpr uint32_t kFrameMagic = 0x46584c43;  // "CLXF"
constexpr uint32_t kChallengeMagic = 0x43584c43;  // "CLXC"
constexpr uint32_t kAuthMagic = 0x55584c43;       // "CLXU"
constexpr uint16_t kWireVersion = 2;  // 2: the job token exchange (CHALLENGE, AUTH, MAC in HELLO_ACK)
constexpr uint16_t kByteOrderMarker = 0x0102;

constexpr size_t kHelloBytes = 40;
constexpr size_t kHelloAckBytes = 64;
constexpr size_t kChallengeBytes = 48;
constexpr size_t kAuthBytes = 80;
constexpr size_t kFrameHeaderBytes = 80;

constexpr uint64_t kMaxMessageBytes = 1ull << 40;  // 1 TiB: anything larger is garbage
constexpr uint32_t kMaxFragmentBytes = 1u << 30;   // one frame's payload
constexpr uint32_t kMaxPoisonTextBytes = 4096;
constexpr int kMaxSocketsPerPeer = 64;

// Sent by the connecting (higher) rank on each new socket.
struct Hello {
  uint64_t comm_id = 0;
  int32_t src_rank = 0;  // the connecting rank
  int32_t dst_rank = 0;  // the rank it believes it reached
  uint32_t socket_index = 0;
  uint32_t sockets_per_peer = 0;
};

// The accepting rank's answer.
struct HelloAck {
  uint64_t comm_id = 0;
  int32_t rank = 0;
  uint32_t sockets_per_peer = 0;
  auth::Mac mac{};  // the accepting rank's MAC (zero without a token)
};

// The accepting rank's challenge, sent after a valid HELLO.
struct Challenge {
  bool token_required = false;
  auth::Nonce nonce{};  // zero without a token
};

// The connecting rank's answer to the challenge.
struct AuthAnswer {
  bool has_token = false;
  auth::Nonce nonce{};
  auth::Mac mac{};
};

void encode_hello(const Hello& hello, uint8_t out[kHelloBytes]);
// Checks magic, version and byte order; false with *why when the bytes are no HELLO.
bool decode_hello(const uint8_t in[kHelloBytes], Hello* out, std::string* why);
void encode_hello_ack(const HelloAck& ack, uint8_t out[kHelloAckBytes]);
bool decode_hello_ack(const uint8_t in[kHelloAckBytes], HelloAck* out, std::string* why);
void encode_challenge(const Challenge& challenge, uint8_t out[kChallengeBytes]);
bool decode_challenge(const uint8_t in[kChallengeBytes], Challenge* out, std::string* why);
void encode_auth(const AuthAnswer& answer, uint8_t out[kAuthBytes]);
bool decode_auth(const uint8_t in[kAuthBytes], AuthAnswer* out, std::string* why);

enum class FrameType : uint8_t { kData = 1, kPoison = 2, kGoodbye = 3 };

// DATA: one fragment of message `msg_id` (payload = msg bytes [frag_offset, +frag_bytes)).
// POISON: the sender failed; tag = its status code, payload = its message text.
// GOODBYE: the sender closes this socket in an orderly way; no payload.
struct FrameHeader {
  FrameType type = FrameType::kData;
  uint8_t flags = 0;
  int32_t src_rank = 0;
  uint32_t frag_bytes = 0;
  uint64_t tag = 0;
  uint64_t msg_id = 0;
  uint64_t msg_bytes = 0;
  uint64_t frag_offset = 0;
  transport::OpDesc desc;
};

void encode_frame_header(const FrameHeader& header, uint8_t out[kFrameHeaderBytes]);
// Decodes and validates magic, version, type, flags, the sender (must be `expected_src`)
// and the lengths (fragment inside its message, message <= 1 TiB, POISON text <= 4096
// bytes, GOODBYE empty). False with *why on any violation.
bool decode_frame_header(const uint8_t in[kFrameHeaderBytes], int expected_src, FrameHeader* out,
                         std::string* why);

// One fragment of a message: bytes [offset, offset + bytes) go on socket `socket`.
struct Fragment {
  int socket = 0;
  uint64_t offset = 0;
  uint32_t bytes = 0;
};
// How a message of `bytes` bytes is sent. Messages of at least `stripe_min_bytes` are split
// into up to `sockets` contiguous fragments, fragment i on socket i; smaller ones (and
// zero-byte ones) form one fragment on socket 0. Fragments never exceed `max_fragment`
// (then more fragments go round-robin). The offset-0 fragment is always first and always on
// socket 0: socket 0 therefore announces every message, in order.
std::vector<Fragment> plan_fragments(uint64_t bytes, int sockets, uint64_t stripe_min_bytes,
                                     uint32_t max_fragment = kMaxFragmentBytes);

}  // namespace tcp
}  // namespace collx
