#include "transports/tcp/wire.h"

#include <cinttypes>
#include <cstring>

#include "lib/common/status.h"

namespace collx {
namespace tcp {

namespace {

// Fixed offsets, memcpy'd: no struct padding or alignment assumptions on the wire.
template <typename T>
void put(uint8_t* out, size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof value);
}
template <typename T>
T get(const uint8_t* in, size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof value);
  return value;
}

bool check_preamble(const uint8_t* in, uint32_t magic, const char* what, std::string* why) {
  uint32_t got_magic = get<uint32_t>(in, 0);
  if (got_magic == __builtin_bswap32(magic)) {
    *why = string_printf("%s from a host with a different byte order", what);
    return false;
  }
  if (got_magic != magic) {
    *why = string_printf("not a collx %s (magic 0x%08x, expected 0x%08x)", what, got_magic, magic);
    return false;
  }
  uint16_t version = get<uint16_t>(in, 4);
  uint16_t marker = get<uint16_t>(in, 6);
  if (marker != kByteOrderMarker) {
    *why = string_printf("%s from a host with a different byte order (marker 0x%04x)", what, marker);
    return false;
  }
  if (version != kWireVersion) {
    *why = string_printf("%s of wire version %u, this build speaks version %u (mixed collx versions?)", what,
                         version, kWireVersion);
    return false;
  }
  return true;
}

}  // namespace

// HELLO: 0 magic u32 | 4 version u16 | 6 byte order u16 | 8 comm_id u64 | 16 src_rank i32 |
//        20 dst_rank i32 | 24 socket_index u32 | 28 sockets_per_peer u32 | 32 reserved u64
void encode_hello(const Hello& hello, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  put<uint32_t>(out, 0, kHelloMagic);
  put<uint16_t>(out, 4, kWireVersion);
  put<uint16_t>(out, 6, kByteOrderMarker);
  put<uint64_t>(out, 8, hello.comm_id);
  put<int32_t>(out, 16, hello.src_rank);
  put<int32_t>(out, 20, hello.dst_rank);
  put<uint32_t>(out, 24, hello.socket_index);
  put<uint32_t>(out, 28, hello.sockets_per_peer);
}

bool decode_hello(const uint8_t in[kHelloBytes], Hello* out, std::string* why) {
  if (!check_preamble(in, kHelloMagic, "HELLO", why)) return false;
  out->comm_id = get<uint64_t>(in, 8);
  out->src_rank = get<int32_t>(in, 16);
  out->dst_rank = get<int32_t>(in, 20);
  out->socket_index = get<uint32_t>(in, 24);
  out->sockets_per_peer = get<uint32_t>(in, 28);
  return true;
}

// HELLO_ACK: 0 magic | 4 version | 6 byte order | 8 comm_id u64 | 16 rank i32 |
//            20 sockets_per_peer u32 | 24 reserved u64 | 32 MAC (32 bytes)
void encode_hello_ack(const HelloAck& ack, uint8_t out[kHelloAckBytes]) {
  std::memset(out, 0, kHelloAckBytes);
  put<uint32_t>(out, 0, kAckMagic);
  put<uint16_t>(out, 4, kWireVersion);
  put<uint16_t>(out, 6, kByteOrderMarker);
  put<uint64_t>(out, 8, ack.comm_id);
  put<int32_t>(out, 16, ack.rank);
  put<uint32_t>(out, 20, ack.sockets_per_peer);
  std::memcpy(out + 32, ack.mac.data(), auth::kMacBytes);
}

bool decode_hello_ack(const uint8_t in[kHelloAckBytes], HelloAck* out, std::string* why) {
  if (!check_preamble(in, kAckMagic, "HELLO_ACK", why)) return false;
  out->comm_id = get<uint64_t>(in, 8);
  out->rank = get<int32_t>(in, 16);
  out->sockets_per_peer = get<uint32_t>(in, 20);
  std::memcpy(out->mac.data(), in + 32, auth::kMacBytes);
  return true;
}

// Bit 0 of the flags word of CHALLENGE and AUTH: a job token is used. Other bits must be 0.
constexpr uint32_t kTokenFlag = 1;

static bool decode_token_flag(const uint8_t* in, const char* what, bool* token, std::string* why) {
  const uint32_t flags = get<uint32_t>(in, 8);
  if ((flags & ~kTokenFlag) != 0) {
    *why = string_printf("%s with unknown flags 0x%08x", what, flags);
    return false;
  }
  *token = (flags & kTokenFlag) != 0;
  return true;
}

// CHALLENGE: 0 magic | 4 version | 6 byte order | 8 flags u32 | 12 reserved u32 | 16 nonce (32)
void encode_challenge(const Challenge& challenge, uint8_t out[kChallengeBytes]) {
  std::memset(out, 0, kChallengeBytes);
  put<uint32_t>(out, 0, kChallengeMagic);
  put<uint16_t>(out, 4, kWireVersion);
  put<uint16_t>(out, 6, kByteOrderMarker);
  put<uint32_t>(out, 8, challenge.token_required ? kTokenFlag : 0);
  std::memcpy(out + 16, challenge.nonce.data(), auth::kNonceBytes);
}

bool decode_challenge(const uint8_t in[kChallengeBytes], Challenge* out, std::string* why) {
  if (!check_preamble(in, kChallengeMagic, "CHALLENGE", why)) return false;
  if (!decode_token_flag(in, "CHALLENGE", &out->token_required, why)) return false;
  std::memcpy(out->nonce.data(), in + 16, auth::kNonceBytes);
  return true;
}

// AUTH: 0 magic | 4 version | 6 byte order | 8 flags u32 | 12 reserved u32 | 16 nonce (32) |
//       48 MAC (32)
void encode_auth(const AuthAnswer& answer, uint8_t out[kAuthBytes]) {
  std::memset(out, 0, kAuthBytes);
  put<uint32_t>(out, 0, kAuthMagic);
  put<uint16_t>(out, 4, kWireVersion);
  put<uint16_t>(out, 6, kByteOrderMarker);
  put<uint32_t>(out, 8, answer.has_token ? kTokenFlag : 0);
  std::memcpy(out + 16, answer.nonce.data(), auth::kNonceBytes);
  std::memcpy(out + 48, answer.mac.data(), auth::kMacBytes);
}

bool decode_auth(const uint8_t in[kAuthBytes], AuthAnswer* out, std::string* why) {
  if (!check_preamble(in, kAuthMagic, "AUTH", why)) return false;
  if (!decode_token_flag(in, "AUTH", &out->has_token, why)) return false;
  std::memcpy(out->nonce.data(), in + 16, auth::kNonceBytes);
  std::memcpy(out->mac.data(), in + 48, auth::kMacBytes);
  return true;
}

// FRAME: 0 magic u32 | 4 version u16 | 6 type u8 | 7 flags u8 | 8 src_rank i32 |
//        12 frag_bytes u32 | 16 tag u64 | 24 msg_id u64 | 32 msg_bytes u64 |
//        40 frag_offset u64 | 48 kind u8 | 49 datatype u8 | 50 op u8 | 51 algorithm u8 |
//        52 root i32 | 56 count u64 | 64 seq u64 | 72 reserved u64
void encode_frame_header(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  put<uint32_t>(out, 0, kFrameMagic);
  put<uint16_t>(out, 4, kWireVersion);
  put<uint8_t>(out, 6, static_cast<uint8_t>(h.type));
  put<uint8_t>(out, 7, h.flags);
  put<int32_t>(out, 8, h.src_rank);
  put<uint32_t>(out, 12, h.frag_bytes);
  put<uint64_t>(out, 16, h.tag);
  put<uint64_t>(out, 24, h.msg_id);
  put<uint64_t>(out, 32, h.msg_bytes);
  put<uint64_t>(out, 40, h.frag_offset);
  put<uint8_t>(out, 48, h.desc.kind);
  put<uint8_t>(out, 49, h.desc.datatype);
  put<uint8_t>(out, 50, h.desc.op);
  put<uint8_t>(out, 51, h.desc.algorithm);
  put<int32_t>(out, 52, h.desc.root);
  put<uint64_t>(out, 56, h.desc.count);
  put<uint64_t>(out, 64, h.desc.seq);
  put<uint64_t>(out, 72, 0);
}

bool decode_frame_header(const uint8_t in[kFrameHeaderBytes], int expected_src, FrameHeader* out,
                         std::string* why) {
  uint32_t magic = get<uint32_t>(in, 0);
  if (magic != kFrameMagic) {
    *why = string_printf("bad frame magic 0x%08x (stream out of sync or not a collx peer)", magic);
    return false;
  }
  uint16_t version = get<uint16_t>(in, 4);
  if (version != kWireVersion) {
    *why = string_printf("frame of wire version %u, expected %u", version, kWireVersion);
    return false;
  }
  uint8_t type = get<uint8_t>(in, 6);
  if (type < static_cast<uint8_t>(FrameType::kData) || type > static_cast<uint8_t>(FrameType::kGoodbye)) {
    *why = string_printf("unknown frame type %u", type);
    return false;
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.flags = get<uint8_t>(in, 7);
  h.src_rank = get<int32_t>(in, 8);
  h.frag_bytes = get<uint32_t>(in, 12);
  h.tag = get<uint64_t>(in, 16);
  h.msg_id = get<uint64_t>(in, 24);
  h.msg_bytes = get<uint64_t>(in, 32);
  h.frag_offset = get<uint64_t>(in, 40);
  h.desc.kind = get<uint8_t>(in, 48);
  h.desc.datatype = get<uint8_t>(in, 49);
  h.desc.op = get<uint8_t>(in, 50);
  h.desc.algorithm = get<uint8_t>(in, 51);
  h.desc.root = get<int32_t>(in, 52);
  h.desc.count = get<uint64_t>(in, 56);
  h.desc.seq = get<uint64_t>(in, 64);

  if (h.flags != 0) {
    *why = string_printf("unknown frame flags 0x%02x", h.flags);
    return false;
  }
  if (h.src_rank != expected_src) {
    *why = string_printf("frame claims source rank %d on the connection of rank %d", h.src_rank, expected_src);
    return false;
  }
  switch (h.type) {
    case FrameType::kData:
      if (h.msg_bytes > kMaxMessageBytes) {
        *why = string_printf("message of %" PRIu64 " bytes exceeds the 1 TiB limit", h.msg_bytes);
        return false;
      }
      if (h.frag_bytes > kMaxFragmentBytes || h.frag_bytes > h.msg_bytes ||
          h.frag_offset > h.msg_bytes - h.frag_bytes) {
        *why = string_printf("fragment [%" PRIu64 ", +%u) outside its message of %" PRIu64 " bytes",
                             h.frag_offset, h.frag_bytes, h.msg_bytes);
        return false;
      }
      break;
    case FrameType::kPoison:
      if (h.frag_bytes > kMaxPoisonTextBytes || h.msg_bytes != h.frag_bytes || h.frag_offset != 0) {
        *why = string_printf("POISON frame with a %u-byte text (limit %u)", h.frag_bytes, kMaxPoisonTextBytes);
        return false;
      }
      break;
    case FrameType::kGoodbye:
      if (h.frag_bytes != 0 || h.msg_bytes != 0 || h.frag_offset != 0) {
        *why = "GOODBYE frame with a payload";
        return false;
      }
      break;
  }
  *out = h;
  return true;
}

std::vector<Fragment> plan_fragments(uint64_t bytes, int sockets, uint64_t stripe_min_bytes,
                                     uint32_t max_fragment) {
  std::vector<Fragment> plan;
  if (bytes == 0) {
    plan.push_back(Fragment{0, 0, 0});
    return plan;
  }
  if (max_fragment == 0) max_fragment = kMaxFragmentBytes;
  uint64_t stripes = 1;
  if (sockets > 1 && bytes >= stripe_min_bytes && bytes >= static_cast<uint64_t>(sockets)) {
    stripes = static_cast<uint64_t>(sockets);
  }
  uint64_t chunk = (bytes + stripes - 1) / stripes;
  // Page-aligned fragment boundaries keep the receiver's copies aligned.
  if (chunk >= 4096) chunk = (chunk + 4095) & ~static_cast<uint64_t>(4095);
  if (chunk > max_fragment) chunk = max_fragment;
  uint64_t index = 0;
  for (uint64_t offset = 0; offset < bytes; offset += chunk, ++index) {
    uint64_t length = bytes - offset < chunk ? bytes - offset : chunk;
    plan.push_back(Fragment{static_cast<int>(index % stripes), offset, static_cast<uint32_t>(length)});
  }
  return plan;
}

}  // namespace tcp
}  // namespace collx
