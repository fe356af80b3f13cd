// Header construction and validation for the UCX transport (pure; see ucx_wire.h).
#include "transports/ucx/ucx_wire.h"

#include <cinttypes>

#include "transports/transport_checks.h"

namespace collx {
namespace ucx {

WireHeader make_header(MsgType type, int src, uint64_t msg_id) {
  WireHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.type = static_cast<uint8_t>(type);
  h.src = src;
  h.msg_id = msg_id;
  return h;
}

Status validate_header(const WireHeader& h, size_t received, uint64_t ucx_tag, int size) {
  const int sender = ucx_tag_sender(ucx_tag);
  auto bad = [&](const char* what) {
    return make_status(COLLX_ERR_PROTOCOL, "malformed UCX header from rank %d: %s (UCX tag %016llx)", sender, what, static_cast<unsigned long long>(ucx_tag));
  };
  if ((ucx_tag & kKindMask) != kHeaderKind) return bad("wrong UCX tag kind");
  if (sender < 0 || sender >= size) return bad("sender rank out of range");
  if (received < sizeof(WireHeader)) return bad("shorter than a header");
  if (h.magic != kMagic) return bad("bad magic");
  if (h.version != kVersion) return bad("unsupported version");
  if (h.src != sender) return bad("sender rank differs from its UCX tag");
  if (h.msg_id == 0 || h.msg_id > kMsgIdMask) return bad("message id out of range");
  if (received - sizeof(WireHeader) != h.inline_bytes) return bad("inline length differs from what arrived");
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kData:
      if (h.bytes > transport::kMaxMessageBytes) return bad("message larger than 1 TiB");
      if (h.inline_bytes != (is_inline(h.bytes) ? h.bytes : 0)) return bad("inline length does not fit the size");
      return Status::Ok();
    case MsgType::kPoison:
      if (h.inline_bytes > kMaxPoisonText) return bad("poison text too long");
      return Status::Ok();
    case MsgType::kGoodbye:
      if (h.inline_bytes != 0) return bad("goodbye with payload");
      return Status::Ok();
  }
  return bad("unknown message type");
}

std::string printable_text(const uint8_t* text, size_t len) {
  std::string out(reinterpret_cast<const char*>(text), len);
  for (char& c : out) {
    if (c < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

}  // namespace ucx
}  // namespace collx
