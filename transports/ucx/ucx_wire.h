// What the UCX transport puts on the wire, as pure functions (no UCX needed, unit-tested):
// the 64-bit UCX tags it uses and the header message that announces every message.
//
// Every collx message travels as a HEADER (UCX tag kHeaderKind | sender rank) carrying the
// collx tag, a per-sender message id, the size and the OpDesc, with the payload inline when
// it is small; a larger payload follows as one DATA message whose UCX tag is
// kDataKind | sender rank | message id, which the receiver posts only once the header
// matched its receive and passed the checks. So no byte reaches a user buffer before the
// mismatch checks ran, and matching per (peer, collx tag) is done by the transport itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace ucx {

// UCX tag layout: 2 bits kind | 22 bits sender rank | 40 bits message id (DATA only).
// WIREUP messages (kind 3) are exchanged once, at creation (ucx_wireup.cc).
constexpr uint64_t kKindShift = 62;
constexpr uint64_t kRankShift = 40;
constexpr uint64_t kKindMask = 3ull << kKindShift;
constexpr uint64_t kHeaderKind = 1ull << kKindShift;
constexpr uint64_t kDataKind = 2ull << kKindShift;
constexpr uint64_t kWireupKind = 3ull << kKindShift;
constexpr uint64_t kMsgIdMask = (1ull << kRankShift) - 1;
constexpr int kMaxRanks = 1 << 22;

inline uint64_t header_ucx_tag(int sender) { return kHeaderKind | (static_cast<uint64_t>(sender) << kRankShift); }
inline uint64_t data_ucx_tag(int sender, uint64_t msg_id) {
  return kDataKind | (static_cast<uint64_t>(sender) << kRankShift) | (msg_id & kMsgIdMask);
}
inline uint64_t wireup_ucx_tag(int sender) { return kWireupKind | (static_cast<uint64_t>(sender) << kRankShift); }
inline int ucx_tag_sender(uint64_t ucx_tag) { return static_cast<int>((ucx_tag & ~kKindMask) >> kRankShift); }

enum class MsgType : uint8_t {
  kData = 1,     // a collx message (payload inline or in a DATA message)
  kPoison = 2,   // the sender failed; payload = status text
  kGoodbye = 3,  // the sender closes in order; nothing follows
};

// Payloads up to this size travel inside the header message (one UCX message, one copy).
constexpr size_t kInlineMax = 8192;
// Longest POISON text accepted.
constexpr size_t kMaxPoisonText = 4096;

struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t type;
  uint8_t reserved;
  int32_t src;
  int32_t code;            // POISON: the collx_status_t of the failure
  uint64_t msg_id;         // per (sender, receiver), from 1, every header type
  uint64_t tag;            // collx tag
  uint64_t bytes;          // message size
  uint32_t inline_bytes;   // payload bytes following this header
  uint32_t reserved2;
  transport::OpDesc desc;
};
static_assert(sizeof(transport::OpDesc) == 24, "OpDesc travels as 24 raw bytes");
static_assert(sizeof(WireHeader) == 72, "header layout is part of the wire format");

constexpr uint32_t kMagic = 0x58554358;  // "XCUX"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderBufBytes = sizeof(WireHeader) + kInlineMax;

// A header for `type` from `src`.
WireHeader make_header(MsgType type, int src, uint64_t msg_id);

// Checks a received header message of `received` bytes that UCX delivered with `ucx_tag`
// to rank `self` of `size`: magic, version, type, sender, sizes. OK or COLLX_ERR_PROTOCOL.
Status validate_header(const WireHeader& h, size_t received, uint64_t ucx_tag, int size);

// Whether a DATA message of `bytes` carries its payload inline.
inline bool is_inline(uint64_t bytes) { return bytes <= kInlineMax; }

// A POISON text from the wire made printable (non-printables replaced).
std::string printable_text(const uint8_t* text, size_t len);

}  // namespace ucx
}  // namespace collx
