// The UCX transport's wire format, without UCX: tag layout and header validation.
#include "transports/ucx/ucx_wire.h"

#include <gtest/gtest.h>

namespace collx {
namespace ucx {
namespace {

TEST(UcxWire, TagsEncodeKindSenderAndId) {
  EXPECT_EQ(ucx_tag_sender(header_ucx_tag(5)), 5);
  EXPECT_EQ(ucx_tag_sender(data_ucx_tag(kMaxRanks - 1, 77)), kMaxRanks - 1);
  EXPECT_EQ(data_ucx_tag(3, 77) & kMsgIdMask, 77u);
  EXPECT_EQ(header_ucx_tag(3) & kKindMask, kHeaderKind);
  EXPECT_EQ(data_ucx_tag(3, 1) & kKindMask, kDataKind);
  EXPECT_NE(header_ucx_tag(3), data_ucx_tag(3, 0));
  // Wire-up notes never land in a header slot (matched on the kind bits) or a data receive.
  EXPECT_EQ(ucx_tag_sender(wireup_ucx_tag(kMaxRanks - 1)), kMaxRanks - 1);
  EXPECT_EQ(wireup_ucx_tag(3) & kKindMask, kWireupKind);
  EXPECT_NE(kWireupKind, kHeaderKind);
  EXPECT_NE(kWireupKind, kDataKind);
}

WireHeader data_header(int src, uint64_t bytes) {
  WireHeader h = make_header(MsgType::kData, src, 1);
  h.bytes = bytes;
  h.inline_bytes = is_inline(bytes) ? static_cast<uint32_t>(bytes) : 0;
  return h;
}

TEST(UcxWire, ValidHeadersPass) {
  WireHeader small = data_header(2, 100);
  EXPECT_TRUE(validate_header(small, sizeof small + 100, header_ucx_tag(2), 4).ok());
  WireHeader large = data_header(2, 1 << 20);
  EXPECT_TRUE(validate_header(large, sizeof large, header_ucx_tag(2), 4).ok());
  WireHeader bye = make_header(MsgType::kGoodbye, 0, 9);
  EXPECT_TRUE(validate_header(bye, sizeof bye, header_ucx_tag(0), 4).ok());
}

TEST(UcxWire, MalformedHeadersAreProtocolErrorsNamingTheSender) {
  auto rejected = [](const WireHeader& h, size_t received, uint64_t tag, const char* what) {
    Status s = validate_header(h, received, tag, 4);
    EXPECT_EQ(s.code(), COLLX_ERR_PROTOCOL) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("from rank"), std::string::npos) << s.message();
  };
  WireHeader h = data_header(2, 100);
  const size_t n = sizeof h + 100;
  rejected(h, n, data_ucx_tag(2, 1), "wrong UCX tag kind");
  rejected(h, n, header_ucx_tag(7), "sender rank out of range");
  rejected(h, 10, header_ucx_tag(2), "shorter than a header");
  rejected(h, n, header_ucx_tag(1), "differs from its UCX tag");
  rejected(h, n - 1, header_ucx_tag(2), "inline length differs");
  WireHeader bad = h;
  bad.magic ^= 1;
  rejected(bad, n, header_ucx_tag(2), "bad magic");
  bad = h;
  bad.version = 99;
  rejected(bad, n, header_ucx_tag(2), "unsupported version");
  bad = h;
  bad.type = 42;
  rejected(bad, n, header_ucx_tag(2), "unknown message type");
  bad = h;
  bad.msg_id = 0;
  rejected(bad, n, header_ucx_tag(2), "message id out of range");
  bad = data_header(2, 1 << 20);
  bad.inline_bytes = 16;  // a large message never carries its payload inline
  rejected(bad, sizeof bad + 16, header_ucx_tag(2), "does not fit the size");
  bad = data_header(2, (1ull << 40) + 1);
  rejected(bad, sizeof bad, header_ucx_tag(2), "larger than 1 TiB");
  WireHeader poison = make_header(MsgType::kPoison, 2, 1);
  poison.inline_bytes = kMaxPoisonText + 1;
  rejected(poison, sizeof poison + kMaxPoisonText + 1, header_ucx_tag(2), "poison text too long");
}

TEST(UcxWire, PoisonTextMadePrintable) {
  const uint8_t text[] = {'o', 'k', '\n', 0x01, 'x'};
  EXPECT_EQ(printable_text(text, sizeof text), "ok??x");
}

}  // namespace
}  // namespace ucx
}  // namespace collx
