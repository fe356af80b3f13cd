// libFuzzer target for the UCX transport's header check (transports/ucx/ucx_wire.h): what a
// peer's HEADER message holds is checked by validate_header before any byte of it is trusted.
// Input: u64 UCX tag | u8 world size | the received message (header + inline payload).
// Properties: no crash; a header that validates obeys what the receive path relies on (sender
// in range and equal to the tag's, inline length equal to what arrived, DATA sizes
// consistent, POISON text bounded, GOODBYE empty); printable_text never keeps a control byte.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transports/ucx/ucx_wire.h"

using namespace collx;
using namespace collx::ucx;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t ucx_tag = 0;
  std::memcpy(&ucx_tag, data, 8);
  const int world = 1 + data[8];
  data += 9;
  size -= 9;
  if (size > kHeaderBufBytes) size = kHeaderBufBytes;  // UCX delivers at most the posted buffer

  WireHeader h{};
  std::memcpy(&h, data, size < sizeof h ? size : sizeof h);
  Status status = validate_header(h, size, ucx_tag, world);
  if (status.ok()) {
    if (h.src < 0 || h.src >= world || h.src != ucx_tag_sender(ucx_tag)) std::abort();
    if (size < sizeof h || size - sizeof h != h.inline_bytes) std::abort();
    switch (static_cast<MsgType>(h.type)) {
      case MsgType::kData:
        if (h.bytes > (1ull << 40) || h.inline_bytes > kInlineMax) std::abort();
        break;
      case MsgType::kPoison:
        if (h.inline_bytes > kMaxPoisonText) std::abort();
        break;
      case MsgType::kGoodbye:
        if (h.inline_bytes != 0) std::abort();
        break;
      default:
        std::abort();
    }
    const std::string text = printable_text(data + sizeof h, h.inline_bytes);
    for (char c : text)
      if (c < 0x20 || c == 0x7f) std::abort();
  } else if (status.code() != COLLX_ERR_PROTOCOL || status.message().empty()) {
    std::abort();
  }
  return 0;
}
