// Block quantization kernels: plain loops without branches in the element loops, so that
// the compiler vectorizes them for the baseline target (SSE2 on x86-64).
#include "parallel/quant_kernels.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace collx {
namespace parallel {
namespace quant {
namespace {

// Adding 1.5 * 2^23 to a float v with |v| < 2^22 rounds it to the nearest integer k,
// ties to even (the default rounding mode), and leaves k in the low bits of the result:
// bits = 0x4B400000 + k. The clamp to [-qmax, qmax] is then on integers, so the loop
// vectorizes (a float comparison may trap, which stops GCC from making it branch-free)
// and a NaN or inf v gives a clamped value without a float-to-int conversion. The quotient
// x / scale of a finite block never exceeds qmax by more than float rounding, so the clamp
// only guards.
constexpr float kRoundMagic = 12582912.0f;
constexpr uint32_t kMagicBits = 0x4B400000u;

inline int32_t round_clamp(float v, int32_t qmax) {
  const float r = v + kRoundMagic;
  uint32_t bits;
  std::memcpy(&bits, &r, 4);
  int32_t k = static_cast<int32_t>(bits - kMagicBits);  // unsigned: wraps, never overflows
  k = k > qmax ? qmax : k;
  return k < -qmax ? -qmax : k;
}

// 1 / scale as used by the quantizers; 0 for the zero and NaN scales (every q is then 0).
inline float inverse(float scale) { return scale > 0 ? 1.0f / scale : 0.0f; }

inline int8_t low_nibble(uint8_t b) { return static_cast<int8_t>(static_cast<uint8_t>(b << 4)) >> 4; }
inline int8_t high_nibble(uint8_t b) { return static_cast<int8_t>(b) >> 4; }

}  // namespace

float block_scale(const float* x, size_t n, int bits) {
  // max of the magnitudes' bit patterns: ordered like the magnitudes for non-negative
  // floats, and >= the pattern of +inf exactly when the block holds an inf or a NaN.
  int32_t top = 0;
  for (size_t i = 0; i < n; ++i) {
    int32_t u;
    std::memcpy(&u, x + i, 4);
    u &= 0x7fffffff;
    top = u > top ? u : top;
  }
  if (top >= 0x7f800000) return std::numeric_limits<float>::quiet_NaN();
  float amax;
  std::memcpy(&amax, &top, 4);
  if (amax < kTinyMax) return 0.0f;
  const float qmax = static_cast<float>(qmax_of(bits));
  float scale = amax / qmax;
  if (std::isinf(scale * qmax)) scale = std::nextafter(scale, 0.0f);
  return scale;
}

void quantize_i8(const float* x, size_t n, float scale, int8_t* q) {
  const float inv = inverse(scale);
  for (size_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(round_clamp(x[i] * inv, 127));
}

void quantize_i4(const float* x, size_t n, float scale, uint8_t* q) {
  const float inv = inverse(scale);
  const size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; ++i) {
    const int32_t lo = round_clamp(x[2 * i] * inv, 7);
    const int32_t hi = round_clamp(x[2 * i + 1] * inv, 7);
    q[i] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
  }
  if (n % 2) q[pairs] = static_cast<uint8_t>(round_clamp(x[n - 1] * inv, 7) & 0xf);
}

void dequantize_i8(const int8_t* q, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

void dequantize_add_i8(const int8_t* q, size_t n, float scale, float* acc) {
  for (size_t i = 0; i < n; ++i) acc[i] += static_cast<float>(q[i]) * scale;
}

void dequantize_i4(const uint8_t* q, size_t n, float scale, float* out) {
  const size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; ++i) {
    out[2 * i] = static_cast<float>(low_nibble(q[i])) * scale;
    out[2 * i + 1] = static_cast<float>(high_nibble(q[i])) * scale;
  }
  if (n % 2) out[n - 1] = static_cast<float>(low_nibble(q[pairs])) * scale;
}

void dequantize_add_i4(const uint8_t* q, size_t n, float scale, float* acc) {
  const size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; ++i) {
    acc[2 * i] += static_cast<float>(low_nibble(q[i])) * scale;
    acc[2 * i + 1] += static_cast<float>(high_nibble(q[i])) * scale;
  }
  if (n % 2) acc[n - 1] += static_cast<float>(low_nibble(q[pairs])) * scale;
}

}  // namespace quant
}  // namespace parallel
}  // namespace collx
