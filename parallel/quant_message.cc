// Encoding and decoding of the quantized-collective messages (layout in quant_message.h).
#include "parallel/quant_message.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel/low_precision.h"
#include "parallel/quant_kernels.h"

namespace collx {
namespace parallel {
namespace quant {
namespace {

constexpr uint8_t kMagic0 = 'C', kMagic1 = 'Q', kVersion = 1;

// Scales are read and written with memcpy: a caller's packed buffer need not be aligned.
float scale_at(const uint8_t* msg, size_t b) {
  float s;
  std::memcpy(&s, msg + kHeaderBytes + 4 * b, 4);
  return s;
}
size_t payload_offset(size_t count, const Format& f) { return kHeaderBytes + 4 * num_blocks(count, f); }
// Byte offset of block b in the payload (blocks are whole bytes: block is even).
size_t block_byte(size_t b, const Format& f) { return f.bits == 8 ? b * f.block : b * f.block / 2; }

std::string format_text(int bits, size_t block, size_t count) {
  return "int" + std::to_string(bits) + ", block_elems " + std::to_string(block) + ", count " + std::to_string(count);
}

}  // namespace

std::string format_problem(const Format& f) {
  if (f.bits != 8 && f.bits != 4) return "bits is " + std::to_string(f.bits) + "; use 8 or 4";
  if (f.block < kMinBlock || f.block > kMaxBlock || f.block % kMinBlock != 0)
    return "block_elems is " + std::to_string(f.block) + "; use a multiple of 16 from 16 to 1048576";
  return "";
}

std::string datatype_problem(collx_datatype_t dt) {
  if (dt == COLLX_FLOAT32 || dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT16) return "";
  return std::string("datatype ") + collx_datatype_name(dt) + " cannot be quantized; use float32, bfloat16 or float16";
}

size_t num_blocks(size_t count, const Format& f) { return (count + f.block - 1) / f.block; }
size_t payload_bytes(size_t count, const Format& f) { return f.bits == 8 ? count : (count + 1) / 2; }
size_t message_bytes(size_t count, const Format& f) {
  const size_t raw = payload_offset(count, f) + payload_bytes(count, f);
  return (raw + 15) / 16 * 16;
}

void widen(const void* src, collx_datatype_t dt, size_t n, float* dst) {
  if (dt == COLLX_FLOAT32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  const uint16_t* h = static_cast<const uint16_t*>(src);
  if (dt == COLLX_BFLOAT16) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(h[i]) << 16;
      std::memcpy(dst + i, &u, 4);
    }
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_float(h[i]);
  }
}

void narrow(const float* src, size_t n, collx_datatype_t dt, void* dst) {
  if (dt == COLLX_FLOAT32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  pack_half(src, static_cast<uint16_t*>(dst), n, 1.0f, dt);
}

void encode_header(size_t count, const Format& f, uint8_t* msg) {
  msg[0] = kMagic0;
  msg[1] = kMagic1;
  msg[2] = kVersion;
  msg[3] = static_cast<uint8_t>(f.bits);
  const uint32_t block = static_cast<uint32_t>(f.block);
  const uint64_t n64 = count;
  std::memcpy(msg + 4, &block, 4);
  std::memcpy(msg + 8, &n64, 8);
}

void encode(const void* in, size_t count, collx_datatype_t dt, const Format& f, uint8_t* msg) {
  const size_t nb = num_blocks(count, f), es = collx_datatype_size(dt);
  const size_t used = payload_offset(count, f) + payload_bytes(count, f);
  std::memset(msg + used, 0, message_bytes(count, f) - used);  // the padding; the rest is written below
  encode_header(count, f, msg);
  uint8_t* payload = msg + payload_offset(count, f);
  std::vector<float> wide(dt == COLLX_FLOAT32 ? 0 : std::min(count, f.block));
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * f.block, n = std::min(f.block, count - first);
    const float* x = static_cast<const float*>(in) + first;
    if (dt != COLLX_FLOAT32) {
      widen(static_cast<const char*>(in) + first * es, dt, n, wide.data());
      x = wide.data();
    }
    const float scale = block_scale(x, n, f.bits);
    std::memcpy(msg + kHeaderBytes + 4 * b, &scale, 4);
    uint8_t* q = payload + block_byte(b, f);
    if (f.bits == 8) quantize_i8(x, n, scale, reinterpret_cast<int8_t*>(q));
    else quantize_i4(x, n, scale, q);
  }
}

std::string header_problem(const uint8_t* msg, size_t count, const Format& f) {
  uint32_t block = 0;
  uint64_t n64 = 0;
  std::memcpy(&block, msg + 4, 4);
  std::memcpy(&n64, msg + 8, 8);
  if (msg[0] != kMagic0 || msg[1] != kMagic1 || msg[2] != kVersion) return "not a quantized message of this version";
  if (msg[3] != f.bits || block != f.block || n64 != count)
    return "it holds " + format_text(msg[3], block, n64) + " but this rank expects " + format_text(f.bits, f.block, count);
  return "";
}

void decode(const uint8_t* msg, size_t count, collx_datatype_t dt, const Format& f, void* out) {
  const size_t nb = num_blocks(count, f), es = collx_datatype_size(dt);
  const uint8_t* payload = msg + payload_offset(count, f);
  std::vector<float> wide(dt == COLLX_FLOAT32 ? 0 : std::min(count, f.block));
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * f.block, n = std::min(f.block, count - first);
    float* y = dt == COLLX_FLOAT32 ? static_cast<float*>(out) + first : wide.data();
    const uint8_t* q = payload + block_byte(b, f);
    if (f.bits == 8) dequantize_i8(reinterpret_cast<const int8_t*>(q), n, scale_at(msg, b), y);
    else dequantize_i4(q, n, scale_at(msg, b), y);
    if (dt != COLLX_FLOAT32) narrow(y, n, dt, static_cast<char*>(out) + first * es);
  }
}

void decode_add(const uint8_t* msg, size_t count, const Format& f, float* acc) {
  const size_t nb = num_blocks(count, f);
  const uint8_t* payload = msg + payload_offset(count, f);
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * f.block, n = std::min(f.block, count - first);
    const uint8_t* q = payload + block_byte(b, f);
    if (f.bits == 8) dequantize_add_i8(reinterpret_cast<const int8_t*>(q), n, scale_at(msg, b), acc + first);
    else dequantize_add_i4(q, n, scale_at(msg, b), acc + first);
  }
}

}  // namespace quant
}  // namespace parallel
}  // namespace collx
