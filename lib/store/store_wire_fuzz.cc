// libFuzzer target for the store wire decoders (not part of the library: the layer's glob
// skips *_fuzz.cc). Build and run, for example:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. -Iinclude \
//     lib/store/store_wire_fuzz.cc lib/store/store_wire.cc lib/common/status.cc -o store_wire_fuzz
//   ./store_wire_fuzz lib/store/fuzz/
// Properties: the decoders never crash or read outside the input, report only OK or
// COLLX_ERR_PROTOCOL, never claim more bytes than given, and whatever decodes re-encodes to
// exactly the bytes it was decoded from.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lib/store/store_wire.h"

using namespace collx;
using namespace collx::store_wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t frame_bytes = 0;
  Request request;
  Status status = decode_request(data, size, &request, &frame_bytes);
  if (!status.ok() && status.code() != COLLX_ERR_PROTOCOL) std::abort();
  if (frame_bytes > size) std::abort();
  if (status.ok() && frame_bytes > 0) {
    Bytes again;
    encode_request(request, &again);
    if (again.size() != frame_bytes || std::memcmp(again.data(), data, frame_bytes) != 0) std::abort();
  }

  Reply reply;
  status = decode_reply(data, size, &reply, &frame_bytes);
  if (!status.ok() && status.code() != COLLX_ERR_PROTOCOL) std::abort();
  if (frame_bytes > size) std::abort();
  if (status.ok() && frame_bytes > 0) {
    Bytes again;
    encode_reply(reply, &again);
    if (again.size() != frame_bytes || std::memcmp(again.data(), data, frame_bytes) != 0) std::abort();
  }
  if (peek_frame_bytes(data, size, false) != 0 && size < kHeaderBytes) std::abort();
  return 0;
}
