// scale (PREMUL_SUM) and divide (AVG): every datatype against a reference that rounds once,
// in place and out of place, with guard elements, plus literal cases for the conversion of
// the scalar and for integer truncation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "lib/dtype/datatype.h"
#include "lib/dtype/reference_for_tests.h"
#include "tests/support/sweep_limits.h"

namespace collx {
namespace {

using reference::kBFloat16;
using reference::kHalf;
using reference::WideFloat;

constexpr size_t kCounts[] = {0, 1, 7, 1000, collx::testing::kLargeSweepCount};  // 64K + 3 under sanitizers

// Element types as the tests see them; 16-bit floats are their bit patterns.
template <typename T>
std::vector<T> random_values(size_t count, uint64_t seed, collx_datatype_t dt) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> moderate(-1000.0, 1000.0);
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = rng();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, uint16_t>) {
      std::memcpy(&values[i], &bits, sizeof(T));
    } else {
      // Mostly moderate values (the rounding cases), some random patterns (the whole range).
      double v = moderate(rng);
      if (i % 4 == 0) v = std::ldexp(v, static_cast<int>(bits % 60) - 30);
      if (dt == COLLX_FLOAT16) values[i] = static_cast<T>(reference::encode(kHalf, v));
      if (dt == COLLX_BFLOAT16) values[i] = static_cast<T>(reference::encode(kBFloat16, v));
      if (dt == COLLX_FLOAT32) values[i] = static_cast<T>(v);
      if (dt == COLLX_FLOAT64) values[i] = static_cast<T>(v);
    }
  }
  return values;
}

// The integer a scalar converts to (truncation, NaN -> 0, saturation beyond int64).
__int128 reference_integer_scalar(double s) {
  if (std::isnan(s)) return 0;
  if (s >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (s <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<__int128>(std::trunc(s));
}

bool same_bits_or_both_nan(collx_datatype_t dt, uint64_t expected_bits, uint64_t actual_bits, double expected,
                           double actual) {
  if (datatype_is_float(dt) && std::isnan(expected)) return std::isnan(actual);
  return expected_bits == actual_bits;
}

// The expected result of one element under scale (by scalar) or divide (by divisor).
template <typename T>
T reference_scale(collx_datatype_t dt, T x, double scalar) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(static_cast<double>(x) * static_cast<float>(scalar));  // exact, then rounded
  } else if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(static_cast<WideFloat>(x) * static_cast<WideFloat>(scalar));
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    const auto format = dt == COLLX_FLOAT16 ? kHalf : kBFloat16;
    const double factor = reference::decode(format, reference::encode_any(format, scalar));
    return reference::encode_any(format, reference::decode(format, x) * factor);
  } else {
    // Modulo 2^128 (a uint64 times an int64 can pass the signed 128-bit range); the low
    // bits that survive the wrap to T are those of the exact product.
    const auto product = static_cast<unsigned __int128>(static_cast<__int128>(x)) *
                         static_cast<unsigned __int128>(reference_integer_scalar(scalar));
    return static_cast<T>(product);
  }
}

template <typename T>
T reference_divide(collx_datatype_t dt, T x, int64_t divisor) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(static_cast<double>(x) / static_cast<double>(divisor));
  } else if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(static_cast<WideFloat>(x) / static_cast<WideFloat>(divisor));
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    const auto format = dt == COLLX_FLOAT16 ? kHalf : kBFloat16;
    return reference::encode_any(format, reference::decode(format, x) / static_cast<double>(divisor));
  } else {
    return static_cast<T>(static_cast<__int128>(x) / divisor);  // C++ truncates toward zero
  }
}

template <typename T>
double as_double(collx_datatype_t dt, T x) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return reference::decode(dt == COLLX_FLOAT16 ? kHalf : kBFloat16, x);
  } else {
    return static_cast<double>(x);
  }
}

template <typename T>
uint64_t bits(T x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof x);
  return b;
}

// Checks out[i] == expected(in[i]) for every element, naming the first mismatch.
template <typename T, typename Expected>
void expect_elementwise(collx_datatype_t dt, const std::vector<T>& in, const T* out, Expected expected) {
  for (size_t i = 0; i < in.size(); ++i) {
    const T want = expected(in[i]);
    ASSERT_TRUE(same_bits_or_both_nan(dt, bits(want), bits(out[i]), as_double(dt, want), as_double(dt, out[i])))
        << datatype_name(dt) << " element " << i << ": input " << as_double(dt, in[i]) << " expected "
        << as_double(dt, want) << " got " << as_double(dt, out[i]);
  }
}

template <typename T>
void check_scale(collx_datatype_t dt) {
  for (double scalar : {1.0, -1.0, 0.0, 3.7, -2.9, 0.1, 1.0 / 3, 300.5, 1e30, -1e30, std::nan("")}) {
    for (size_t count : kCounts) {
      SCOPED_TRACE("scalar " + std::to_string(scalar) + " count " + std::to_string(count));
      const std::vector<T> in = random_values<T>(count, count * 7 + 3, dt);
      const auto expected = [&](T x) { return reference_scale(dt, x, scalar); };
      // Out of place, one element off alignment, with a guard element after the output.
      std::vector<T> out(count + 2, T{});
      const T guard = static_cast<T>(0x5a);
      out[count + 1] = guard;
      scale(out.data() + 1, in.data(), count, dt, scalar);
      expect_elementwise(dt, in, out.data() + 1, expected);
      ASSERT_EQ(bits(out[count + 1]), bits(guard)) << "scale wrote past the end";
      // In place.
      std::vector<T> buf = in;
      scale(buf.data(), buf.data(), count, dt, scalar);
      expect_elementwise(dt, in, buf.data(), expected);
    }
  }
}

template <typename T>
void check_divide(collx_datatype_t dt) {
  const int64_t big = int64_t{1} << 32;
  for (int64_t divisor : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{8}, int64_t{1000},
                          int64_t{1} << 24, int64_t{1} << 31, big, big + 1,
                          std::numeric_limits<int64_t>::max()}) {
    // Float types promise exactness for divisors float32 holds exactly (rank counts).
    if (datatype_is_float(dt) && divisor > (int64_t{1} << 24)) continue;
    for (size_t count : kCounts) {
      SCOPED_TRACE("divisor " + std::to_string(divisor) + " count " + std::to_string(count));
      const std::vector<T> in = random_values<T>(count, count * 11 + 5, dt);
      std::vector<T> buf(count + 1);
      std::copy(in.begin(), in.end(), buf.begin() + 1);  // one element off alignment
      divide(buf.data() + 1, count, dt, divisor);
      expect_elementwise(dt, in, buf.data() + 1, [&](T x) { return reference_divide(dt, x, divisor); });
    }
  }
}

TEST(Scale, MatchesReferenceForEveryDatatype) {
  check_scale<int8_t>(COLLX_INT8);
  check_scale<uint8_t>(COLLX_UINT8);
  check_scale<int32_t>(COLLX_INT32);
  check_scale<uint32_t>(COLLX_UINT32);
  check_scale<int64_t>(COLLX_INT64);
  check_scale<uint64_t>(COLLX_UINT64);
  check_scale<uint16_t>(COLLX_FLOAT16);
  check_scale<uint16_t>(COLLX_BFLOAT16);
  check_scale<float>(COLLX_FLOAT32);
  check_scale<double>(COLLX_FLOAT64);
}

TEST(Divide, MatchesReferenceForEveryDatatype) {
  check_divide<int8_t>(COLLX_INT8);
  check_divide<uint8_t>(COLLX_UINT8);
  check_divide<int32_t>(COLLX_INT32);
  check_divide<uint32_t>(COLLX_UINT32);
  check_divide<int64_t>(COLLX_INT64);
  check_divide<uint64_t>(COLLX_UINT64);
  check_divide<uint16_t>(COLLX_FLOAT16);
  check_divide<uint16_t>(COLLX_BFLOAT16);
  check_divide<float>(COLLX_FLOAT32);
  check_divide<double>(COLLX_FLOAT64);
}

TEST(Scale, IntegersUseTheScalarTruncatedTowardZero) {
  std::vector<int32_t> v = {1, -5, 7};
  scale(v.data(), v.data(), v.size(), COLLX_INT32, 3.7);
  EXPECT_EQ(v, (std::vector<int32_t>{3, -15, 21}));
  scale(v.data(), v.data(), v.size(), COLLX_INT32, -2.9);
  EXPECT_EQ(v, (std::vector<int32_t>{-6, 30, -42}));
  scale(v.data(), v.data(), v.size(), COLLX_INT32, 0.99);
  EXPECT_EQ(v, (std::vector<int32_t>{0, 0, 0}));
  // Unsigned types scaled by -1 wrap, consistently with SUM: x + (-1 * x) == 0 mod 2^8.
  std::vector<uint8_t> u = {1, 2, 200};
  scale(u.data(), u.data(), u.size(), COLLX_UINT8, -1.0);
  EXPECT_EQ(u, (std::vector<uint8_t>{255, 254, 56}));
}

TEST(Scale, Float16ConvertsTheScalarToFloat16First) {
  // 0.1 as float16 is 0.0999755859375; times 3 is 0.2999267578125, a tie that goes to even
  // 0x34cc. Using the float32 0.1 instead would give 0x34cd.
  uint16_t x = 0x4200;  // 3.0
  scale(&x, &x, 1, COLLX_FLOAT16, 0.1);
  EXPECT_EQ(x, 0x34cc);
}

TEST(Divide, IntegersTruncateTowardZero) {
  std::vector<int32_t> v = {7, -7, INT32_MIN, INT32_MAX, -1};
  divide(v.data(), v.size(), COLLX_INT32, 2);
  EXPECT_EQ(v, (std::vector<int32_t>{3, -3, INT32_MIN / 2, INT32_MAX / 2, 0}));
  std::vector<int64_t> w = {INT64_MIN, INT64_MAX, -9};
  divide(w.data(), w.size(), COLLX_INT64, 4);
  EXPECT_EQ(w, (std::vector<int64_t>{INT64_MIN / 4, INT64_MAX / 4, -2}));
  std::vector<uint32_t> u = {UINT32_MAX, 5};
  divide(u.data(), u.size(), COLLX_UINT32, 3);
  EXPECT_EQ(u, (std::vector<uint32_t>{UINT32_MAX / 3, 1}));
}

TEST(Divide, Int8AndUint8ExhaustivelyForSmallDivisors) {
  for (int64_t divisor = 1; divisor <= 300; ++divisor) {
    std::vector<int8_t> s(256);
    std::vector<uint8_t> u(256);
    for (int i = 0; i < 256; ++i) {
      s[i] = static_cast<int8_t>(i - 128);
      u[i] = static_cast<uint8_t>(i);
    }
    divide(s.data(), s.size(), COLLX_INT8, divisor);
    divide(u.data(), u.size(), COLLX_UINT8, divisor);
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(s[i], (i - 128) / divisor) << "divisor " << divisor;
      ASSERT_EQ(u[i], i / divisor) << "divisor " << divisor;
    }
  }
}

TEST(Divide, FloatsDivideRatherThanMultiplyByTheReciprocal) {
  // 5 * fl(1/3) rounds differently from the correctly rounded 5 / 3, in both precisions.
  static_assert(5.0f / 3.0f != 5.0f * (1.0f / 3.0f), "the example must discriminate");
  static_assert(5.0 / 3.0 != 5.0 * (1.0 / 3.0), "the example must discriminate");
  float f = 5.0f;
  divide(&f, 1, COLLX_FLOAT32, 3);
  EXPECT_EQ(f, 5.0f / 3.0f);
  double d = 5.0;
  divide(&d, 1, COLLX_FLOAT64, 3);
  EXPECT_EQ(d, 5.0 / 3.0);
  uint16_t h = 0x4900;  // 10.0 in float16; 10 / 4 = 2.5 exactly
  divide(&h, 1, COLLX_FLOAT16, 4);
  EXPECT_EQ(h, 0x4100);
}

TEST(Divide, NonPositiveDivisorIsACallerBug) {
  std::vector<int32_t> v = {10, 20};
  // Debug builds assert; release builds leave the buffer unchanged.
  EXPECT_DEBUG_DEATH(divide(v.data(), v.size(), COLLX_INT32, 0), "divisor");
  EXPECT_EQ(v, (std::vector<int32_t>{10, 20}));
}

}  // namespace
}  // namespace collx
