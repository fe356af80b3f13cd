#include "lib/store/store_wire.h"

#include <cinttypes>

#include "lib/common/auth.h"

namespace collx {
namespace store_wire {
namespace {

constexpr size_t kLengthBytes = 4;
constexpr size_t kMaxKeyField = kLengthBytes + kStoreMaxKeyBytes;
constexpr size_t kMaxValueField = kLengthBytes + kStoreMaxValueBytes;
constexpr size_t kAuthField = kLengthBytes + auth::kNonceBytes;  // a nonce or a MAC
static_assert(auth::kNonceBytes == auth::kMacBytes, "AUTH fields share one size");

bool valid_opcode(uint16_t raw) {
  return raw >= static_cast<uint16_t>(Opcode::kHello) && raw <= static_cast<uint16_t>(Opcode::kAuth);
}

// The largest body a well-formed frame of this kind can have: a larger length field is
// rejected from the header alone, before any buffer is sized for it.
size_t max_body_bytes(Opcode opcode, bool reply) {
  if (reply) {
    size_t common = 4 + kLengthBytes + kMaxMessageBytes;
    switch (opcode) {
      case Opcode::kHello: return common + 2 + kAuthField;
      case Opcode::kAuth: return common + kAuthField;
      case Opcode::kGet:
      case Opcode::kCompareSet: return common + kMaxValueField;
      case Opcode::kAdd: return common + 8;
      default: return common;
    }
  }
  switch (opcode) {
    case Opcode::kHello:
    case Opcode::kPing: return 0;
    case Opcode::kSet: return kMaxKeyField + kMaxValueField;
    case Opcode::kGet:
    case Opcode::kAdd: return kMaxKeyField + 8;
    case Opcode::kCompareSet: return kMaxKeyField + 2 * kMaxValueField;
    case Opcode::kWait: return 4 + kStoreMaxWaitKeys * kMaxKeyField + 8;
    case Opcode::kDelete: return kMaxKeyField;
    case Opcode::kAuth: return 2 * kAuthField;
  }
  return 0;
}

class Writer {
 public:
  explicit Writer(Bytes* out) : out_(out) {}
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void bytes(const uint8_t* data, size_t size) {
    u32(static_cast<uint32_t>(size));
    out_->insert(out_->end(), data, data + size);
  }
  void bytes(const Bytes& b) { bytes(b.data(), b.size()); }
  void text(const std::string& s) { bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Bytes* out_;
};

// Reads fields from a body, never past its end; every failure names the field.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const char* frame) : data_(data), size_(size), frame_(frame) {}

  Status u16(const char* what, uint16_t* v) { return le(what, 2, v); }
  Status u32(const char* what, uint32_t* v) { return le(what, 4, v); }
  Status i64(const char* what, int64_t* v) {
    uint64_t raw = 0;
    COLLX_RETURN_IF_ERROR(le(what, 8, &raw));
    *v = static_cast<int64_t>(raw);
    return Status::Ok();
  }
  template <typename Container>
  Status bytes(const char* what, size_t limit, Container* out) {
    uint32_t length = 0;
    COLLX_RETURN_IF_ERROR(u32(what, &length));
    if (length > limit)
      return make_status(COLLX_ERR_PROTOCOL, "%s: %s of %" PRIu32 " bytes exceeds the limit of %zu bytes", frame_,
                         what, length, limit);
    if (length > size_ - offset_)
      return make_status(COLLX_ERR_PROTOCOL, "%s: %s of %" PRIu32 " bytes runs past the end of the frame (%zu bytes left)",
                         frame_, what, length, size_ - offset_);
    out->assign(data_ + offset_, data_ + offset_ + length);
    offset_ += length;
    return Status::Ok();
  }
  // A byte string of exactly `length` bytes (a nonce or a MAC).
  Status exact_bytes(const char* what, size_t length, Bytes* out) {
    COLLX_RETURN_IF_ERROR(bytes(what, length, out));
    if (out->size() != length)
      return make_status(COLLX_ERR_PROTOCOL, "%s: %s of %zu bytes (expected %zu)", frame_, what, out->size(), length);
    return Status::Ok();
  }
  Status finish() const {
    if (offset_ != size_)
      return make_status(COLLX_ERR_PROTOCOL, "%s: %zu unexpected bytes after the last field", frame_, size_ - offset_);
    return Status::Ok();
  }

 private:
  template <typename T>
  Status le(const char* what, size_t n, T* v) {
    if (size_ - offset_ < n)
      return make_status(COLLX_ERR_PROTOCOL, "%s: frame ends inside %s (%zu of %zu bytes)", frame_, what,
                         size_ - offset_, n);
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(data_[offset_ + i]) << (8 * i);
    offset_ += n;
    *v = static_cast<T>(value);
    return Status::Ok();
  }

  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  const char* frame_;
};

// Appends the header, leaving the body length to patch_body_length once the body is written.
size_t begin_frame(uint16_t opcode, uint32_t request_id, Bytes* out) {
  size_t start = out->size();
  Writer w(out);
  w.u32(kMagic);
  w.u16(kProtocolVersion);
  w.u16(opcode);
  w.u32(request_id);
  w.u32(0);
  return start;
}

void patch_body_length(size_t frame_start, Bytes* out) {
  uint32_t body = static_cast<uint32_t>(out->size() - frame_start - kHeaderBytes);
  for (int i = 0; i < 4; ++i) (*out)[frame_start + 12 + i] = static_cast<uint8_t>(body >> (8 * i));
}

// Shared framing of decode_request / decode_reply: the header, then the body's extent.
Status locate_frame(const uint8_t* data, size_t size, bool reply, Header* header, size_t* frame_bytes) {
  *frame_bytes = 0;
  if (size < kHeaderBytes) return Status::Ok();
  COLLX_RETURN_IF_ERROR(decode_header(data, size, reply, header));
  if (size - kHeaderBytes < header->body_bytes) return Status::Ok();
  *frame_bytes = kHeaderBytes + header->body_bytes;
  return Status::Ok();
}

}  // namespace

const char* opcode_name(Opcode opcode) {
  switch (opcode) {
    case Opcode::kHello: return "HELLO";
    case Opcode::kSet: return "SET";
    case Opcode::kGet: return "GET";
    case Opcode::kAdd: return "ADD";
    case Opcode::kCompareSet: return "COMPARE_SET";
    case Opcode::kWait: return "WAIT";
    case Opcode::kDelete: return "DELETE";
    case Opcode::kPing: return "PING";
    case Opcode::kAuth: return "AUTH";
  }
  return "UNKNOWN";
}

void encode_request(const Request& request, Bytes* out) {
  out->reserve(out->size() + kHeaderBytes + 64 + request.key.size() + request.value.size() + request.expected.size());
  size_t start = begin_frame(static_cast<uint16_t>(request.opcode), request.request_id, out);
  Writer w(out);
  switch (request.opcode) {
    case Opcode::kHello:
    case Opcode::kPing: break;
    case Opcode::kSet:
      w.text(request.key);
      w.bytes(request.value);
      break;
    case Opcode::kGet:
      w.text(request.key);
      w.i64(request.timeout_ms);
      break;
    case Opcode::kAdd:
      w.text(request.key);
      w.i64(request.delta);
      break;
    case Opcode::kCompareSet:
      w.text(request.key);
      w.bytes(request.expected);
      w.bytes(request.value);
      break;
    case Opcode::kWait:
      w.u32(static_cast<uint32_t>(request.keys.size()));
      for (const auto& key : request.keys) w.text(key);
      w.i64(request.timeout_ms);
      break;
    case Opcode::kDelete: w.text(request.key); break;
    case Opcode::kAuth:
      w.bytes(request.nonce);
      w.bytes(request.mac);
      break;
  }
  patch_body_length(start, out);
}

void encode_reply(const Reply& reply, Bytes* out) {
  out->reserve(out->size() + kHeaderBytes + 64 + reply.message.size() + reply.value.size());
  size_t start = begin_frame(static_cast<uint16_t>(reply.opcode) | kReplyFlag, reply.request_id, out);
  Writer w(out);
  w.u32(static_cast<uint32_t>(static_cast<int32_t>(reply.status)));
  w.text(reply.message.size() > kMaxMessageBytes ? reply.message.substr(0, kMaxMessageBytes) : reply.message);
  if (reply.status == COLLX_OK) {
    switch (reply.opcode) {
      case Opcode::kHello:
        w.u16(reply.server_version);
        w.bytes(reply.challenge);
        break;
      case Opcode::kAuth: w.bytes(reply.mac); break;
      case Opcode::kGet:
      case Opcode::kCompareSet: w.bytes(reply.value); break;
      case Opcode::kAdd: w.i64(reply.new_value); break;
      default: break;
    }
  }
  patch_body_length(start, out);
}

Status decode_header(const uint8_t* data, size_t size, bool expect_reply, Header* out) {
  if (size < kHeaderBytes)
    return make_status(COLLX_ERR_PROTOCOL, "frame header truncated (%zu of %zu bytes)", size, kHeaderBytes);
  Reader r(data, kHeaderBytes, "frame header");
  COLLX_RETURN_IF_ERROR(r.u32("magic", &out->magic));
  COLLX_RETURN_IF_ERROR(r.u16("version", &out->version));
  COLLX_RETURN_IF_ERROR(r.u16("opcode", &out->opcode));
  COLLX_RETURN_IF_ERROR(r.u32("request id", &out->request_id));
  COLLX_RETURN_IF_ERROR(r.u32("body length", &out->body_bytes));
  if (out->magic != kMagic)
    return make_status(COLLX_ERR_PROTOCOL, "bad magic 0x%08" PRIx32 " (expected 0x%08" PRIx32 ": not a collx store peer)",
                       out->magic, kMagic);
  if (out->version != kProtocolVersion)
    return make_status(COLLX_ERR_PROTOCOL, "unsupported store protocol version %u (this side speaks %u)",
                       static_cast<unsigned>(out->version), static_cast<unsigned>(kProtocolVersion));
  const bool is_reply = (out->opcode & kReplyFlag) != 0;
  const uint16_t base = static_cast<uint16_t>(out->opcode & ~kReplyFlag);
  if (is_reply != expect_reply || !valid_opcode(base))
    return make_status(COLLX_ERR_PROTOCOL, "unexpected opcode 0x%04x in a %s", static_cast<unsigned>(out->opcode),
                       expect_reply ? "reply" : "request");
  const size_t limit = max_body_bytes(static_cast<Opcode>(base), is_reply);
  if (out->body_bytes > limit)
    return make_status(COLLX_ERR_PROTOCOL, "%s %s body of %" PRIu32 " bytes exceeds the limit of %zu bytes",
                       opcode_name(static_cast<Opcode>(base)), is_reply ? "reply" : "request", out->body_bytes, limit);
  return Status::Ok();
}

size_t peek_frame_bytes(const uint8_t* data, size_t size, bool expect_reply) {
  Header header;
  if (size < kHeaderBytes || !decode_header(data, size, expect_reply, &header).ok()) return 0;
  return kHeaderBytes + header.body_bytes;
}

Status decode_request(const uint8_t* data, size_t size, Request* out, size_t* frame_bytes) {
  Header header;
  size_t total = 0;
  *frame_bytes = 0;
  COLLX_RETURN_IF_ERROR(locate_frame(data, size, false, &header, &total));
  if (total == 0) return Status::Ok();
  Request request;
  request.opcode = static_cast<Opcode>(header.opcode);
  request.request_id = header.request_id;
  Reader r(data + kHeaderBytes, header.body_bytes, opcode_name(request.opcode));
  switch (request.opcode) {
    case Opcode::kHello:
    case Opcode::kPing: break;
    case Opcode::kSet:
      COLLX_RETURN_IF_ERROR(r.bytes("key", kStoreMaxKeyBytes, &request.key));
      COLLX_RETURN_IF_ERROR(r.bytes("value", kStoreMaxValueBytes, &request.value));
      break;
    case Opcode::kGet:
    case Opcode::kAdd:
      COLLX_RETURN_IF_ERROR(r.bytes("key", kStoreMaxKeyBytes, &request.key));
      COLLX_RETURN_IF_ERROR(r.i64(request.opcode == Opcode::kGet ? "timeout" : "delta",
                                  request.opcode == Opcode::kGet ? &request.timeout_ms : &request.delta));
      break;
    case Opcode::kCompareSet:
      COLLX_RETURN_IF_ERROR(r.bytes("key", kStoreMaxKeyBytes, &request.key));
      COLLX_RETURN_IF_ERROR(r.bytes("expected value", kStoreMaxValueBytes, &request.expected));
      COLLX_RETURN_IF_ERROR(r.bytes("desired value", kStoreMaxValueBytes, &request.value));
      break;
    case Opcode::kWait: {
      uint32_t count = 0;
      COLLX_RETURN_IF_ERROR(r.u32("key count", &count));
      if (count > kStoreMaxWaitKeys)
        return make_status(COLLX_ERR_PROTOCOL, "WAIT: %" PRIu32 " keys exceed the limit of %zu keys", count,
                           kStoreMaxWaitKeys);
      // Each key needs at least its length field: a count the body cannot hold is rejected
      // before reserving room for it.
      if (count > header.body_bytes / kLengthBytes)
        return make_status(COLLX_ERR_PROTOCOL, "WAIT: %" PRIu32 " keys cannot fit in a body of %" PRIu32 " bytes",
                           count, header.body_bytes);
      request.keys.resize(count);
      for (auto& key : request.keys) COLLX_RETURN_IF_ERROR(r.bytes("key", kStoreMaxKeyBytes, &key));
      COLLX_RETURN_IF_ERROR(r.i64("timeout", &request.timeout_ms));
      break;
    }
    case Opcode::kDelete: COLLX_RETURN_IF_ERROR(r.bytes("key", kStoreMaxKeyBytes, &request.key)); break;
    case Opcode::kAuth:
      COLLX_RETURN_IF_ERROR(r.exact_bytes("client nonce", auth::kNonceBytes, &request.nonce));
      COLLX_RETURN_IF_ERROR(r.exact_bytes("client MAC", auth::kMacBytes, &request.mac));
      break;
  }
  COLLX_RETURN_IF_ERROR(r.finish());
  if ((request.opcode == Opcode::kGet || request.opcode == Opcode::kWait) && request.timeout_ms < -1)
    return make_status(COLLX_ERR_PROTOCOL, "%s: negative timeout %" PRId64 " ms", opcode_name(request.opcode),
                       request.timeout_ms);
  *out = std::move(request);
  *frame_bytes = total;
  return Status::Ok();
}

Status decode_reply(const uint8_t* data, size_t size, Reply* out, size_t* frame_bytes) {
  Header header;
  size_t total = 0;
  *frame_bytes = 0;
  COLLX_RETURN_IF_ERROR(locate_frame(data, size, true, &header, &total));
  if (total == 0) return Status::Ok();
  Reply reply;
  reply.opcode = static_cast<Opcode>(header.opcode & ~kReplyFlag);
  reply.request_id = header.request_id;
  Reader r(data + kHeaderBytes, header.body_bytes, opcode_name(reply.opcode));
  uint32_t raw_status = 0;
  COLLX_RETURN_IF_ERROR(r.u32("status", &raw_status));
  const int32_t status = static_cast<int32_t>(raw_status);
  if (status > COLLX_OK || status <= COLLX_STATUS_LAST_)
    return make_status(COLLX_ERR_PROTOCOL, "%s reply: unknown status %" PRId32, opcode_name(reply.opcode), status);
  reply.status = static_cast<collx_status_t>(status);
  COLLX_RETURN_IF_ERROR(r.bytes("message", kMaxMessageBytes, &reply.message));
  if (reply.status == COLLX_OK) {
    switch (reply.opcode) {
      case Opcode::kHello:
        COLLX_RETURN_IF_ERROR(r.u16("server version", &reply.server_version));
        COLLX_RETURN_IF_ERROR(r.bytes("challenge", auth::kNonceBytes, &reply.challenge));
        if (!reply.challenge.empty() && reply.challenge.size() != auth::kNonceBytes)
          return make_status(COLLX_ERR_PROTOCOL, "HELLO reply: challenge of %zu bytes (expected 0 or %zu)",
                             reply.challenge.size(), auth::kNonceBytes);
        break;
      case Opcode::kAuth: COLLX_RETURN_IF_ERROR(r.exact_bytes("server MAC", auth::kMacBytes, &reply.mac)); break;
      case Opcode::kGet:
      case Opcode::kCompareSet: COLLX_RETURN_IF_ERROR(r.bytes("value", kStoreMaxValueBytes, &reply.value)); break;
      case Opcode::kAdd: COLLX_RETURN_IF_ERROR(r.i64("new value", &reply.new_value)); break;
      default: break;
    }
  }
  COLLX_RETURN_IF_ERROR(r.finish());
  *out = std::move(reply);
  *frame_bytes = total;
  return Status::Ok();
}

}  // namespace store_wire
}  // namespace collx
