// libFuzzer target for the TCP store wire decoders (lib/store/store_wire.h): every byte a
// store client or server receives goes through them. Build and run with fuzz/run.sh store_wire.
// Properties: the decoders never crash or read outside the input, report only OK or
// COLLX_ERR_PROTOCOL, never claim more bytes than given, and whatever decodes re-encodes to
// exactly the bytes it was decoded from.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lib/store/store_wire.h"

using namespace collx;
using namespace collx::store_wire;

namespace {

// Decodes the input as a request or a reply: only OK or COLLX_ERR_PROTOCOL, never more bytes
// claimed than given, and a decoded frame re-encodes to exactly its bytes.
template <typename Frame>
void round_trip(const uint8_t* data, size_t size, Status (*decode)(const uint8_t*, size_t, Frame*, size_t*),
                void (*encode)(const Frame&, Bytes*)) {
  size_t frame_bytes = 0;
  Frame frame;
  Status status = decode(data, size, &frame, &frame_bytes);
  if (!status.ok() && status.code() != COLLX_ERR_PROTOCOL) std::abort();
  if (frame_bytes > size) std::abort();
  if (status.ok() && frame_bytes > 0) {
    Bytes again;
    encode(frame, &again);
    if (again.size() != frame_bytes || std::memcmp(again.data(), data, frame_bytes) != 0) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  round_trip<Request>(data, size, decode_request, encode_request);
  round_trip<Reply>(data, size, decode_reply, encode_reply);
  if (peek_frame_bytes(data, size, false) != 0 && size < kHeaderBytes) std::abort();
  return 0;
}
