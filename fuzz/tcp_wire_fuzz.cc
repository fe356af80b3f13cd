// libFuzzer target for the TCP transport's wire decoders (transports/tcp/wire.h): the HELLO,
// CHALLENGE, AUTH and HELLO_ACK of the connection handshake and the 80-byte frame header that precedes every
// payload. The first input byte picks the rank the frame must come from, the rest is the
// bytes a peer sent. Properties: no crash or read outside the fixed-size buffers, and a frame
// header that decodes obeys what the receive path relies on (fragment inside its message,
// message <= 1 TiB, POISON text bounded, GOODBYE empty, the expected sender).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "transports/tcp/wire.h"

using namespace collx;
using namespace collx::tcp;

namespace {

// The decoders take fixed-size arrays: copy what the input holds, zero the rest.
template <size_t N>
void fill(const uint8_t* data, size_t size, uint8_t (&out)[N]) {
  std::memset(out, 0, N);
  std::memcpy(out, data, size < N ? size : N);
}

void check_frame(const uint8_t* data, size_t size, int expected_src) {
  uint8_t bytes[kFrameHeaderBytes];
  fill(data, size, bytes);
  FrameHeader header;
  std::string why;
  if (!decode_frame_header(bytes, expected_src, &header, &why)) {
    if (why.empty()) std::abort();  // every refusal must say why
    return;
  }
  if (header.src_rank != expected_src) std::abort();
  if (header.msg_bytes > kMaxMessageBytes) std::abort();
  if (header.frag_bytes > kMaxFragmentBytes) std::abort();
  if (header.frag_offset > header.msg_bytes || header.frag_bytes > header.msg_bytes - header.frag_offset) {
    if (header.type == FrameType::kData) std::abort();
  }
  if (header.type == FrameType::kPoison && header.frag_bytes > kMaxPoisonTextBytes) std::abort();
  if (header.type == FrameType::kGoodbye && header.frag_bytes != 0) std::abort();
}

// Decodes the input as one handshake message of N bytes. A success must re-encode to the same
// bytes over `fields` (offset, length pairs: reserved bytes are not kept); a refusal must say
// why.
template <size_t N, typename Message>
void round_trip(const uint8_t* data, size_t size, bool (*decode)(const uint8_t*, Message*, std::string*),
                void (*encode)(const Message&, uint8_t*), std::initializer_list<std::pair<size_t, size_t>> fields) {
  uint8_t bytes[N];
  fill(data, size, bytes);
  Message message;
  std::string why;
  if (!decode(bytes, &message, &why)) {
    if (why.empty()) std::abort();
    return;
  }
  uint8_t again[N];
  encode(message, again);
  for (const auto& field : fields)
    if (std::memcmp(again + field.first, bytes + field.first, field.second) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int expected_src = data[0] & 0x7f;
  ++data;
  --size;
  round_trip<kHelloBytes, Hello>(data, size, decode_hello, encode_hello, {{0, 32}});
  round_trip<kHelloAckBytes, HelloAck>(data, size, decode_hello_ack, encode_hello_ack, {{0, 24}, {32, 32}});
  round_trip<kChallengeBytes, Challenge>(data, size, decode_challenge, encode_challenge, {{0, 12}, {16, 32}});
  round_trip<kAuthBytes, AuthAnswer>(data, size, decode_auth, encode_auth, {{0, 12}, {16, 64}});
  check_frame(data, size, expected_src);
  return 0;
}
