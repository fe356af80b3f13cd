// Block quantization kernels and the message format: the documented error bound on random
// data of many magnitudes, and the policy on zeros, NaN/inf, subnormals, one huge value
// per block and values near FLT_MAX; int4 nibble order; bfloat16/float16 inputs; header
// checks and config errors through the C calls.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/low_precision.h"
#include "parallel/quant_kernels.h"
#include "parallel/quant_message.h"

namespace {

namespace q = collx::parallel::quant;

collx_quant_config_t config(int bits, size_t block) {
  collx_quant_config_t c;
  collx_quant_config_init(&c, sizeof c);
  c.bits = bits;
  c.block_elems = block;
  return c;
}

// Round trip through the C calls.
std::vector<float> round_trip(const std::vector<float>& x, int bits, size_t block) {
  const collx_quant_config_t c = config(bits, block);
  size_t bytes = 0;
  EXPECT_EQ(collx_quant_packed_bytes(x.size(), &c, &bytes), COLLX_OK);
  std::vector<uint8_t> packed(bytes);
  std::vector<float> y(x.size(), -1.0f);
  EXPECT_EQ(collx_quant_pack(x.data(), x.size(), COLLX_FLOAT32, &c, packed.data()), COLLX_OK)
      << collx_last_error(nullptr);
  EXPECT_EQ(collx_quant_unpack(packed.data(), x.size(), COLLX_FLOAT32, &c, y.data()), COLLX_OK)
      << collx_last_error(nullptr);
  return y;
}

// The documented scale of block b, computed independently in double.
double expected_scale(const std::vector<float>& x, size_t b, size_t block, int bits) {
  double amax = 0;
  for (size_t i = b * block; i < std::min(x.size(), (b + 1) * block); ++i) amax = std::max(amax, std::fabs(double(x[i])));
  return amax / (bits == 8 ? 127.0 : 7.0);
}

// Every element within (1 + 2^-12) * scale / 2 of x; returns the largest error / scale.
double check_bound(const std::vector<float>& x, const std::vector<float>& y, size_t block, int bits) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double scale = expected_scale(x, i / block, block, bits);
    const double err = std::fabs(double(x[i]) - double(y[i]));
    EXPECT_LE(err, (1 + 0x1p-12) * scale / 2 + 1e-45) << "element " << i << " x " << x[i] << " y " << y[i];
    if (scale > 0) worst = std::max(worst, err / scale);
  }
  return worst;
}

TEST(QuantKernels, RandomBlocksStayWithinHalfAScale) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-60, 60);
  for (int bits : {8, 4}) {
    for (size_t block : {16u, 256u, 2048u}) {
      std::vector<float> x(5000 + 7);  // a partial last block
      for (size_t i = 0; i < x.size(); ++i) {
        if (i % block == 0) rng.discard(1);
        x[i] = std::ldexp(normal(rng), exponent(rng) / 4 + static_cast<int>((i / block) % 7) * 9 - 30);
      }
      const std::vector<float> y = round_trip(x, bits, block);
      const double worst = check_bound(x, y, block, bits);
      // The bound is tight: random data comes close to half a step somewhere.
      EXPECT_GT(worst, 0.4) << "bits " << bits << " block " << block;
    }
  }
}

TEST(QuantKernels, IntegersOnTheGridComeBackExactly) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 255) - 127);
  EXPECT_EQ(round_trip(x, 8, 256), x);
  std::vector<float> x4(32);
  for (size_t i = 0; i < x4.size(); ++i) x4[i] = static_cast<float>(static_cast<int>(i % 15) - 7);
  EXPECT_EQ(round_trip(x4, 4, 32), x4);
}

TEST(QuantKernels, HalfwayValuesRoundToEven) {
  // amax 127 gives scale 1: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2.
  std::vector<float> x(16, 0.0f);
  x[0] = 127;
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = 2.5f;
  x[4] = -2.5f;
  const std::vector<float> y = round_trip(x, 8, 16);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[3], 2.0f);
  EXPECT_EQ(y[4], -2.0f);
}

TEST(QuantKernels, Int4PacksLowNibbleFirst) {
  std::vector<float> x(16, 0.0f);
  x[0] = 7;   // q 7  -> low nibble 0x7
  x[1] = -7;  // q -7 -> high nibble 0x9
  x[2] = -1;  // 0xf
  x[3] = 1;   // 0x1
  const collx_quant_config_t c = config(4, 16);
  size_t bytes = 0;
  ASSERT_EQ(collx_quant_packed_bytes(x.size(), &c, &bytes), COLLX_OK);
  EXPECT_EQ(bytes, 32u);  // 16 header + 4 scale + 8 payload, padded to 32
  std::vector<uint8_t> packed(bytes);
  ASSERT_EQ(collx_quant_pack(x.data(), x.size(), COLLX_FLOAT32, &c, packed.data()), COLLX_OK);
  float scale;
  std::memcpy(&scale, packed.data() + 16, 4);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(packed[20], 0x97);
  EXPECT_EQ(packed[21], 0x1f);
  EXPECT_EQ(packed[0], 'C');
  EXPECT_EQ(packed[3], 4);
}

TEST(QuantKernels, PackedBytesFollowTheWireFormat) {
  size_t bytes = 0;
  collx_quant_config_t c = config(8, 256);
  ASSERT_EQ(collx_quant_packed_bytes(1000, &c, &bytes), COLLX_OK);
  EXPECT_EQ(bytes, 1040u);  // 16 + 4 * 4 + 1000 = 1032 -> 1040
  c.bits = 4;
  ASSERT_EQ(collx_quant_packed_bytes(1001, &c, &bytes), COLLX_OK);
  EXPECT_EQ(bytes, 544u);  // 16 + 16 + 501 = 533 -> 544
  ASSERT_EQ(collx_quant_packed_bytes(0, nullptr, &bytes), COLLX_OK);
  EXPECT_EQ(bytes, 16u);
}

TEST(QuantKernels, ZeroBlocksAndTinyBlocksReadBackAsZeros) {
  std::vector<float> x(64, 0.0f);
  for (size_t i = 16; i < 32; ++i) x[i] = (i % 2 ? 1 : -1) * 1e-35f;  // below 2^-100: flushed
  for (size_t i = 48; i < 64; ++i) x[i] = static_cast<float>(i) * 1e-42f;  // subnormals only
  x[40] = -0.0f;
  for (int bits : {8, 4}) {
    const std::vector<float> y = round_trip(x, bits, 16);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], 0.0f) << i;
  }
}

TEST(QuantKernels, SubnormalsInANormalBlockKeepTheBound) {
  // Block 0: subnormals beside a normal maximum (they quantize to 0 or small q); block 1:
  // subnormals beside a maximum just above the 2^-100 flush limit.
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1) * 1e-42f;
  x[5] = 1e-20f;
  x[20] = 1e-28f;
  for (int bits : {8, 4}) check_bound(x, round_trip(x, bits, 16), 16, bits);
}

TEST(QuantKernels, NonFiniteValuesPoisonOnlyTheirBlock) {
  std::vector<float> x(80);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 7.0f;
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[40] = std::numeric_limits<float>::infinity();
  x[63] = -std::numeric_limits<float>::infinity();
  for (int bits : {8, 4}) {
    const std::vector<float> y = round_trip(x, bits, 16);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t b = i / 16;
      if (b == 1 || b == 2 || b == 3) {
        EXPECT_TRUE(std::isnan(y[i])) << i;
      } else {
        EXPECT_LE(std::fabs(x[i] - y[i]), (1 + 0x1p-12) * expected_scale(x, b, 16, bits) / 2) << i;
      }
    }
  }
}

TEST(QuantKernels, OneHugeValueCostsOnlyItsBlock) {
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 5) * 0.01f;
  x[300] = 1e30f;  // block 1 of 256
  const std::vector<float> y = round_trip(x, 8, 256);
  check_bound(x, y, 256, 8);
  EXPECT_NEAR(y[300], 1e30f, 1e30f / 127 / 2);
  for (size_t i = 256; i < 512; ++i) {
    if (i == 300) continue;
    EXPECT_EQ(y[i], 0.0f) << "small values of the huge block round to 0";
  }
  for (size_t i = 0; i < 256; ++i) EXPECT_LE(std::fabs(x[i] - y[i]), 1.05f / 127 / 2 * (1 + 0x1p-12));
}

TEST(QuantKernels, ValuesNearFloatMaxStayFinite) {
  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * FLT_MAX / static_cast<float>(1 + i % 3);
  for (int bits : {8, 4}) {
    const std::vector<float> y = round_trip(x, bits, 16);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_TRUE(std::isfinite(y[i])) << i;
    check_bound(x, y, 16, bits);
  }
}

TEST(QuantKernels, HalfInputsAddOnlyTheOutputRounding) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (collx_datatype_t dt : {COLLX_BFLOAT16, COLLX_FLOAT16}) {
    const size_t n = 700;
    std::vector<uint16_t> h(n), back(n);
    std::vector<float> x(n), y(n);
    for (float& e : y) e = u(rng);
    collx::parallel::pack_half(y.data(), h.data(), n, 1.0f, dt);
    q::widen(h.data(), dt, n, x.data());
    const collx_quant_config_t c = config(8, 256);
    size_t bytes = 0;
    ASSERT_EQ(collx_quant_packed_bytes(n, &c, &bytes), COLLX_OK);
    std::vector<uint8_t> packed(bytes);
    ASSERT_EQ(collx_quant_pack(h.data(), n, dt, &c, packed.data()), COLLX_OK);
    ASSERT_EQ(collx_quant_unpack(packed.data(), n, dt, &c, back.data()), COLLX_OK);
    q::widen(back.data(), dt, n, y.data());
    const double half_ulp = dt == COLLX_BFLOAT16 ? 0x1p-8 : 0x1p-11;  // relative, of the output
    for (size_t i = 0; i < n; ++i) {
      const double scale = expected_scale(x, i / 256, 256, 8);
      EXPECT_LE(std::fabs(double(x[i]) - y[i]), (1 + 0x1p-12) * scale / 2 + std::fabs(double(y[i])) * half_ulp) << i;
    }
  }
}

TEST(QuantKernels, UnpackRefusesAMessageOfAnotherFormat) {
  std::vector<float> x(64, 1.0f), y(64);
  const collx_quant_config_t c8 = config(8, 16), c4 = config(4, 16), c32 = config(8, 32);
  std::vector<uint8_t> packed(1024);
  ASSERT_EQ(collx_quant_pack(x.data(), 64, COLLX_FLOAT32, &c8, packed.data()), COLLX_OK);
  EXPECT_EQ(collx_quant_unpack(packed.data(), 64, COLLX_FLOAT32, &c4, y.data()), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("holds int8, block_elems 16, count 64 but this rank "
                                                          "expects int4"),
            std::string::npos)
      << collx_last_error(nullptr);
  EXPECT_EQ(collx_quant_unpack(packed.data(), 64, COLLX_FLOAT32, &c32, y.data()), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(collx_quant_unpack(packed.data(), 63, COLLX_FLOAT32, &c8, y.data()), COLLX_ERR_INVALID_ARG);
  packed[0] = 'X';
  EXPECT_EQ(collx_quant_unpack(packed.data(), 64, COLLX_FLOAT32, &c8, y.data()), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("not a quantized message"), std::string::npos);
}

TEST(QuantKernels, QuotientsBeyondTheRangeSaturate) {
  // A scale far below max|x| / qmax (not what block_scale returns, but the kernels must
  // not wrap around): every q saturates at +-qmax with the sign of x; non-finite x stay
  // in range too.
  std::vector<float> x = {1.0f, -1.0f, 3e38f, -3e38f, 0.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::vector<int8_t> q(x.size());
  q::quantize_i8(x.data(), x.size(), 1e-30f, q.data());
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 127);
  EXPECT_EQ(q[3], -127);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[6], 127);
  EXPECT_EQ(q[7], -127);
  for (int8_t v : q) EXPECT_GE(v, -127);
  std::vector<uint8_t> q4(x.size() / 2);
  std::vector<float> y(x.size());
  q::quantize_i4(x.data(), x.size(), 1e-30f, q4.data());
  q::dequantize_i4(q4.data(), x.size(), 1.0f, y.data());
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[1], -7.0f);
  EXPECT_EQ(y[4], 0.0f);
  for (float v : y) EXPECT_LE(std::fabs(v), 7.0f);
}

TEST(QuantKernels, BadConfigsAndDatatypesAreNamed) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> packed(1024);
  const struct {
    int bits;
    size_t block;
    const char* says;
  } cases[] = {{5, 256, "bits is 5"}, {8, 24, "block_elems is 24"}, {4, 0, "block_elems is 0"},
               {8, (size_t(1) << 20) + 16, "block_elems is 1048592"}};
  for (const auto& k : cases) {
    const collx_quant_config_t c = config(k.bits, k.block);
    EXPECT_EQ(collx_quant_pack(x.data(), 64, COLLX_FLOAT32, &c, packed.data()), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find(k.says), std::string::npos) << collx_last_error(nullptr);
  }
  EXPECT_EQ(collx_quant_pack(x.data(), 64, COLLX_INT32, nullptr, packed.data()), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("datatype int32 cannot be quantized"), std::string::npos)
      << collx_last_error(nullptr);
  collx_quant_config_t small = config(8, 256);
  small.size = 8;
  EXPECT_EQ(collx_quant_pack(x.data(), 64, COLLX_FLOAT32, &small, packed.data()), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(collx_quant_config_init(nullptr, sizeof small), COLLX_ERR_INVALID_ARG);
}

}  // namespace
