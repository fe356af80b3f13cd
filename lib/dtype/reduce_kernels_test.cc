// reduce_fn / reduce3_fn: every kernel variant (kernel_isa.h) x datatype x {SUM, PROD, MIN,
// MAX} against an exact reference (128-bit integers, double or __float128 with a single
// final rounding), over counts that exercise the vector body and the scalar tail, with
// pointers offset by one element, and guard elements around the output that must stay
// untouched. Variants the CPU lacks are skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/dtype/datatype.h"
#include "lib/dtype/kernel_isa.h"
#include "lib/dtype/reference_for_tests.h"
#include "tests/support/sweep_limits.h"

namespace collx {
namespace {

using reference::bits_of;
using reference::float_of;

struct Case {
  KernelIsa isa;
  collx_datatype_t datatype;
  collx_op_t op;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string isa = kernel_isa_name(info.param.isa);
  for (char& c : isa) c = c == '-' ? '_' : c;
  return isa + "_" + datatype_name(info.param.datatype) + "_" + op_name(info.param.op);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (KernelIsa isa : kAllKernelIsas) {
    for (int dt = 0; dt < COLLX_NUM_DATATYPES; ++dt) {
      for (collx_op_t op : {COLLX_SUM, COLLX_PROD, COLLX_MIN, COLLX_MAX}) {
        cases.push_back({isa, static_cast<collx_datatype_t>(dt), op});
      }
    }
  }
  return cases;
}

// Random 16-bit floats including NaN and infinity patterns, for comparing variants.
std::vector<uint16_t> random_bit_patterns(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> values(count);
  for (uint16_t& v : values) v = static_cast<uint16_t>(rng());
  return values;
}

// ---- Reference results, one element at a time ---------------------------------------

template <typename T>
T integer_reference(collx_op_t op, T a, T b) {
  const __int128 x = a;
  const __int128 y = b;
  switch (op) {
    case COLLX_SUM: return reference::wrap<T>(x + y);
    // Two uint64 values can multiply past the signed 128-bit range, so multiply modulo
    // 2^128 (unsigned); the low bits, all that wrap<T> keeps, are the exact product's.
    case COLLX_PROD:
      return static_cast<T>(static_cast<unsigned __int128>(x) * static_cast<unsigned __int128>(y));
    case COLLX_MIN: return std::min(a, b);
    default: return std::max(a, b);
  }
}

// The documented float MIN/MAX: the strictly smaller (larger) operand, otherwise the second
// one (ties such as +0 vs -0). The test data hold no NaN.
template <typename V>
bool second_wins(collx_op_t op, V a, V b) {
  return op == COLLX_MIN ? !(a < b) : !(a > b);
}

float float32_reference(collx_op_t op, float a, float b) {
  // Sums and products of two floats are exact in double, so this rounds once.
  switch (op) {
    case COLLX_SUM: return static_cast<float>(static_cast<double>(a) + b);
    case COLLX_PROD: return static_cast<float>(static_cast<double>(a) * b);
    default: return second_wins(op, a, b) ? b : a;
  }
}

double float64_reference(collx_op_t op, double a, double b) {
  using Wide = reference::WideFloat;
  switch (op) {
    case COLLX_SUM: return static_cast<double>(static_cast<Wide>(a) + static_cast<Wide>(b));
    case COLLX_PROD: return static_cast<double>(static_cast<Wide>(a) * static_cast<Wide>(b));
    default: return second_wins(op, a, b) ? b : a;
  }
}

// float16/bfloat16: the exact (or, for bfloat16 sums, 53-bit) result rounded once to the
// format; a NaN result (inf - inf) is reported as the format's quiet NaN.
uint16_t small_float_reference(reference::SmallFloatFormat format, collx_op_t op, uint16_t a,
                               uint16_t b) {
  const double x = reference::decode(format, a);
  const double y = reference::decode(format, b);
  double exact;
  switch (op) {
    case COLLX_SUM: exact = x + y; break;
    case COLLX_PROD: exact = x * y; break;
    default: return second_wins(op, x, y) ? b : a;
  }
  return reference::encode_any(format, exact);
}

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

void reference_element(collx_datatype_t dt, collx_op_t op, const unsigned char* a,
                       const unsigned char* b, unsigned char* out) {
  switch (dt) {
    case COLLX_INT8: return store(out, integer_reference(op, load<int8_t>(a), load<int8_t>(b)));
    case COLLX_UINT8: return store(out, integer_reference(op, load<uint8_t>(a), load<uint8_t>(b)));
    case COLLX_INT32: return store(out, integer_reference(op, load<int32_t>(a), load<int32_t>(b)));
    case COLLX_UINT32: return store(out, integer_reference(op, load<uint32_t>(a), load<uint32_t>(b)));
    case COLLX_INT64: return store(out, integer_reference(op, load<int64_t>(a), load<int64_t>(b)));
    case COLLX_UINT64: return store(out, integer_reference(op, load<uint64_t>(a), load<uint64_t>(b)));
    case COLLX_FLOAT16:
      return store(out, small_float_reference(reference::kHalf, op, load<uint16_t>(a), load<uint16_t>(b)));
    case COLLX_BFLOAT16:
      return store(out, small_float_reference(reference::kBFloat16, op, load<uint16_t>(a), load<uint16_t>(b)));
    case COLLX_FLOAT32: return store(out, float32_reference(op, load<float>(a), load<float>(b)));
    case COLLX_FLOAT64: return store(out, float64_reference(op, load<double>(a), load<double>(b)));
    default: FAIL() << "bad datatype";
  }
}

bool is_nan_element(collx_datatype_t dt, const unsigned char* p) {
  switch (dt) {
    case COLLX_FLOAT16: return reference::is_nan(reference::kHalf, load<uint16_t>(p));
    case COLLX_BFLOAT16: return reference::is_nan(reference::kBFloat16, load<uint16_t>(p));
    case COLLX_FLOAT32: return std::isnan(load<float>(p));
    case COLLX_FLOAT64: return std::isnan(load<double>(p));
    default: return false;
  }
}

// Bitwise equal, except that any NaN equals any NaN.
bool same_element(collx_datatype_t dt, const unsigned char* x, const unsigned char* y) {
  if (is_nan_element(dt, x) || is_nan_element(dt, y)) return is_nan_element(dt, x) && is_nan_element(dt, y);
  return std::memcmp(x, y, datatype_size(dt)) == 0;
}

// ---- Test data -----------------------------------------------------------------------

// Random elements, no NaN: a third random bit patterns (the whole range: subnormals,
// infinities, overflowing products), the rest small values whose sums and products round,
// and some signed zeros.
std::vector<unsigned char> random_elements(collx_datatype_t dt, size_t count, uint64_t seed) {
  const size_t size = datatype_size(dt);
  std::vector<unsigned char> bytes(count * size);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> small(-8.0, 8.0);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = bytes.data() + i * size;
    const uint64_t random_bits = rng();
    std::memcpy(p, &random_bits, size);
    if (!datatype_is_float(dt)) continue;
    const bool use_small = i % 3 != 0;
    const double zero = (i % 2) ? -0.0 : 0.0;
    const double value = i % 50 == 7 ? zero : small(rng);
    switch (dt) {
      case COLLX_FLOAT16:
        if (use_small) store(p, reference::encode(reference::kHalf, value));
        if (reference::is_nan(reference::kHalf, load<uint16_t>(p))) store<uint16_t>(p, 0x3c00);
        break;
      case COLLX_BFLOAT16:
        if (use_small) store(p, reference::encode(reference::kBFloat16, value));
        if (reference::is_nan(reference::kBFloat16, load<uint16_t>(p))) store<uint16_t>(p, 0x3f80);
        break;
      case COLLX_FLOAT32:
        if (use_small) store(p, static_cast<float>(value));
        if (std::isnan(load<float>(p))) store(p, 1.5f);
        break;
      default:
        if (use_small) store(p, value);
        if (std::isnan(load<double>(p))) store(p, 2.5);
        break;
    }
  }
  return bytes;
}

// A buffer of count elements at an offset of `offset` elements, with one guard element
// before and after filled with a marker that must survive.
struct GuardedBuffer {
  GuardedBuffer(size_t element_size, size_t count, size_t offset)
      : size(element_size), count(count), offset(offset), bytes((count + offset + 2) * element_size, kMarker) {}

  unsigned char* data() { return bytes.data() + (offset + 1) * size; }
  bool guards_intact() const {
    const size_t before = offset * size;  // the element just before data()
    const size_t after = (offset + 1 + count) * size;
    for (size_t i = 0; i < size; ++i) {
      if (bytes[before + i] != kMarker || bytes[after + i] != kMarker) return false;
    }
    return true;
  }

  static constexpr unsigned char kMarker = 0xa5;
  size_t size, count, offset;
  std::vector<unsigned char> bytes;
};

// memcpy/memcmp that accept the null data() of empty vectors.
void copy_bytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}
bool same_bytes(const void* x, const void* y, size_t n) { return n == 0 || std::memcmp(x, y, n) == 0; }

// ---- Tests ---------------------------------------------------------------------------

class ReduceKernels : public ::testing::TestWithParam<Case> {};

// Index of the first element where actual differs from expected, or count.
size_t first_mismatch(collx_datatype_t dt, const unsigned char* expected, const unsigned char* actual,
                      size_t count) {
  const size_t size = datatype_size(dt);
  for (size_t i = 0; i < count; ++i) {
    if (!same_element(dt, expected + i * size, actual + i * size)) return i;
  }
  return count;
}

TEST_P(ReduceKernels, MatchReferenceForEveryCountAndOffset) {
  const KernelIsa isa = GetParam().isa;
  if (!kernel_isa_supported(isa)) GTEST_SKIP() << kernel_isa_name(isa) << " not supported here";
  const collx_datatype_t dt = GetParam().datatype;
  const collx_op_t op = GetParam().op;
  const ReduceFn reduce = reduce_fn_for(isa, dt, op);
  const Reduce3Fn reduce3 = reduce3_fn_for(isa, dt, op);
  ASSERT_NE(reduce, nullptr);
  ASSERT_NE(reduce3, nullptr);
  const size_t size = datatype_size(dt);

  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, collx::testing::kLargeSweepCount}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      SCOPED_TRACE("count " + std::to_string(count) + " offset " + std::to_string(offset));
      const std::vector<unsigned char> a = random_elements(dt, count, 1000 * count + 17 * dt + op);
      const std::vector<unsigned char> b = random_elements(dt, count, 2000 * count + 31 * dt + op + 1);
      std::vector<unsigned char> expected(count * size);
      for (size_t i = 0; i < count; ++i) {
        reference_element(dt, op, &a[i * size], &b[i * size], &expected[i * size]);
      }

      GuardedBuffer dst(size, count, offset), src(size, count, offset);
      copy_bytes(dst.data(), a.data(), a.size());
      copy_bytes(src.data(), b.data(), b.size());
      reduce(dst.data(), src.data(), count);
      size_t bad = first_mismatch(dt, expected.data(), dst.data(), count);
      ASSERT_EQ(bad, count) << "reduce differs at element " << bad;
      ASSERT_TRUE(dst.guards_intact()) << "reduce wrote outside [dst, dst + count)";
      ASSERT_TRUE(same_bytes(src.data(), b.data(), b.size())) << "reduce modified src";

      GuardedBuffer left(size, count, offset), right(size, count, offset), out(size, count, offset);
      copy_bytes(left.data(), a.data(), a.size());
      copy_bytes(right.data(), b.data(), b.size());
      reduce3(out.data(), left.data(), right.data(), count);
      ASSERT_TRUE(out.guards_intact()) << "reduce3 wrote outside [dst, dst + count)";
      ASSERT_TRUE(same_bytes(out.data(), dst.data(), count * size)) << "reduce3 differs from reduce";

      // In place on either input: each element is read before it is written.
      reduce3(left.data(), left.data(), right.data(), count);
      ASSERT_TRUE(same_bytes(left.data(), dst.data(), count * size)) << "reduce3 with dst == a";
      copy_bytes(left.data(), a.data(), a.size());
      reduce3(right.data(), left.data(), right.data(), count);
      ASSERT_TRUE(same_bytes(right.data(), dst.data(), count * size)) << "reduce3 with dst == b";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariantsDatatypesAndOps, ReduceKernels, ::testing::ValuesIn(all_cases()),
                         case_name);

TEST(KernelIsa, ReduceFnUsesTheBestSupportedVariant) {
  const KernelIsa best = best_kernel_isa();
  EXPECT_TRUE(kernel_isa_supported(best));
  EXPECT_TRUE(kernel_isa_supported(KernelIsa::kPortable));
  for (int dt = 0; dt < COLLX_NUM_DATATYPES; ++dt) {
    for (int op = 0; op < COLLX_NUM_OPS; ++op) {
      const auto datatype = static_cast<collx_datatype_t>(dt);
      const auto reduction = static_cast<collx_op_t>(op);
      EXPECT_EQ(reduce_fn(datatype, reduction), reduce_fn_for(best, datatype, reduction));
      EXPECT_EQ(reduce3_fn(datatype, reduction), reduce3_fn_for(best, datatype, reduction));
    }
  }
  std::printf("kernel variant in use: %s\n", kernel_isa_name(best));
}

// Every variant gives the portable variant's exact bits on 16-bit float patterns that cover
// NaN, infinities and subnormals; a NaN result must be NaN in both, but which input's
// payload survives NaN + NaN is up to the compiler's operand order (IEEE leaves it open).
TEST(KernelIsa, VariantsAgreeBitwiseOnSixteenBitFloatsIncludingNan) {
  const size_t count = 100003;
  const std::vector<uint16_t> a = random_bit_patterns(count, 1), b = random_bit_patterns(count, 2);
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_supported(isa)) continue;
    for (collx_datatype_t dt : {COLLX_FLOAT16, COLLX_BFLOAT16}) {
      for (collx_op_t op : {COLLX_SUM, COLLX_PROD, COLLX_MIN, COLLX_MAX}) {
        std::vector<uint16_t> expected = a, actual = a;
        reduce_fn_for(KernelIsa::kPortable, dt, op)(expected.data(), b.data(), count);
        reduce_fn_for(isa, dt, op)(actual.data(), b.data(), count);
        const auto format = dt == COLLX_FLOAT16 ? reference::kHalf : reference::kBFloat16;
        for (size_t i = 0; i < count; ++i) {
          if (reference::is_nan(format, expected[i]) && reference::is_nan(format, actual[i])) continue;
          ASSERT_EQ(actual[i], expected[i]) << kernel_isa_name(isa) << " " << datatype_name(dt) << " "
                                            << op_name(op) << " element " << i << std::hex << " a=" << a[i]
                                            << " b=" << b[i];
        }
      }
    }
  }
}

TEST(ReduceFnLookup, HasNoKernelForAvgPremulSumOrInvalidInput) {
  for (int dt = 0; dt < COLLX_NUM_DATATYPES; ++dt) {
    const auto datatype = static_cast<collx_datatype_t>(dt);
    EXPECT_EQ(reduce_fn(datatype, COLLX_AVG), nullptr);
    EXPECT_EQ(reduce_fn(datatype, COLLX_PREMUL_SUM), nullptr);
    EXPECT_EQ(reduce3_fn(datatype, COLLX_AVG), nullptr);
    EXPECT_EQ(reduce3_fn(datatype, COLLX_PREMUL_SUM), nullptr);
    EXPECT_EQ(reduce_fn(datatype, static_cast<collx_op_t>(COLLX_NUM_OPS)), nullptr);
    EXPECT_EQ(reduce_fn(datatype, static_cast<collx_op_t>(-1)), nullptr);
  }
  EXPECT_EQ(reduce_fn(static_cast<collx_datatype_t>(COLLX_NUM_DATATYPES), COLLX_SUM), nullptr);
  EXPECT_EQ(reduce_fn(static_cast<collx_datatype_t>(-1), COLLX_SUM), nullptr);
  EXPECT_EQ(reduce3_fn(static_cast<collx_datatype_t>(COLLX_NUM_DATATYPES), COLLX_MAX), nullptr);
  // Distinct kernels, so a table mix-up (say MIN where MAX belongs) is caught by the tests above
  // rather than hidden behind a shared pointer.
  EXPECT_NE(reduce_fn(COLLX_INT32, COLLX_MIN), reduce_fn(COLLX_INT32, COLLX_MAX));
  EXPECT_NE(reduce_fn(COLLX_INT32, COLLX_SUM), reduce_fn(COLLX_UINT32, COLLX_SUM));
}

// dst OP src for a handful of values, through every supported variant. The values are
// repeated nine times so that each lands in a vector block as well as in a scalar tail;
// every copy in every variant must agree, and the result is returned once.
template <typename T>
std::vector<T> reduce_values(collx_datatype_t dt, collx_op_t op, const std::vector<T>& dst,
                             const std::vector<T>& src) {
  constexpr size_t kCopies = 9;
  std::vector<T> src_copies;
  for (size_t c = 0; c < kCopies; ++c) src_copies.insert(src_copies.end(), src.begin(), src.end());
  std::vector<T> first_result;
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_supported(isa)) continue;
    std::vector<T> out;
    for (size_t c = 0; c < kCopies; ++c) out.insert(out.end(), dst.begin(), dst.end());
    reduce_fn_for(isa, dt, op)(out.data(), src_copies.data(), out.size());
    const std::vector<T> result(out.begin(), out.begin() + dst.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(std::memcmp(&out[i], &result[i % dst.size()], sizeof(T)), 0)
          << kernel_isa_name(isa) << ": copy " << i / dst.size() << " of element " << i % dst.size();
    }
    if (first_result.empty()) first_result = result;
    EXPECT_EQ(std::memcmp(result.data(), first_result.data(), result.size() * sizeof(T)), 0)
        << kernel_isa_name(isa) << " differs from the portable variant";
  }
  return first_result;
}

TEST(ReduceIntegers, SumAndProdWrapAroundInTwosComplement) {
  using V8 = std::vector<int8_t>;
  EXPECT_EQ(reduce_values(COLLX_INT8, COLLX_SUM, V8{127, -128, -1}, V8{1, -1, -128}), (V8{-128, 127, 127}));
  EXPECT_EQ(reduce_values(COLLX_INT8, COLLX_PROD, V8{-128, 16}, V8{-1, 16}), (V8{-128, 0}));
  using U8 = std::vector<uint8_t>;
  EXPECT_EQ(reduce_values(COLLX_UINT8, COLLX_SUM, U8{255, 200}, U8{1, 100}), (U8{0, 44}));
  EXPECT_EQ(reduce_values(COLLX_UINT8, COLLX_PROD, U8{255}, U8{255}), (U8{1}));
  using V32 = std::vector<int32_t>;
  EXPECT_EQ(reduce_values(COLLX_INT32, COLLX_PROD, V32{INT32_MIN, 65536}, V32{-1, 65536}), (V32{INT32_MIN, 0}));
  EXPECT_EQ(reduce_values(COLLX_INT32, COLLX_SUM, V32{INT32_MAX}, V32{INT32_MAX}), (V32{-2}));
  using V64 = std::vector<int64_t>;
  EXPECT_EQ(reduce_values(COLLX_INT64, COLLX_SUM, V64{INT64_MAX}, V64{1}), (V64{INT64_MIN}));
  EXPECT_EQ(reduce_values(COLLX_INT64, COLLX_PROD, V64{int64_t{1} << 62}, V64{-4}), (V64{0}));
  using U64 = std::vector<uint64_t>;
  EXPECT_EQ(reduce_values(COLLX_UINT64, COLLX_SUM, U64{UINT64_MAX}, U64{2}), (U64{1}));
  // MIN/MAX compare as the datatype's own signedness.
  EXPECT_EQ(reduce_values(COLLX_INT8, COLLX_MIN, V8{-1}, V8{1}), (V8{-1}));
  EXPECT_EQ(reduce_values(COLLX_UINT8, COLLX_MIN, U8{255}, U8{1}), (U8{1}));
  EXPECT_EQ(reduce_values(COLLX_UINT64, COLLX_MAX, U64{UINT64_MAX}, U64{1}), (U64{UINT64_MAX}));
}

TEST(ReduceFloats, MinMaxReturnTheSecondOperandForNanAndSignedZeroTies) {
  const float nan = std::nanf("");
  using F = std::vector<float>;
  const F mins = reduce_values(COLLX_FLOAT32, COLLX_MIN, F{nan, 1.0f, 0.0f, -0.0f}, F{1.0f, nan, -0.0f, 0.0f});
  EXPECT_EQ(mins[0], 1.0f);  // a NaN in dst is replaced
  EXPECT_TRUE(std::isnan(mins[1]));  // a NaN in src propagates
  EXPECT_EQ(bits_of(mins[2]), bits_of(-0.0f));
  EXPECT_EQ(bits_of(mins[3]), bits_of(0.0f));
  using D = std::vector<double>;
  const D maxes = reduce_values(COLLX_FLOAT64, COLLX_MAX, D{std::nan(""), 1.0}, D{1.0, std::nan("")});
  EXPECT_EQ(maxes[0], 1.0);
  EXPECT_TRUE(std::isnan(maxes[1]));
  using H = std::vector<uint16_t>;
  const H half_max = reduce_values(COLLX_FLOAT16, COLLX_MAX, H{0x7e00, 0x3c00}, H{0x3c00, 0x7e00});
  EXPECT_EQ(half_max[0], 0x3c00);
  EXPECT_TRUE(reference::is_nan(reference::kHalf, half_max[1]));
}

TEST(ReduceFloats, InfinitiesOfOppositeSignSumToNan) {
  using H = std::vector<uint16_t>;
  EXPECT_TRUE(reference::is_nan(reference::kHalf, reduce_values(COLLX_FLOAT16, COLLX_SUM, H{0x7c00}, H{0xfc00})[0]));
  EXPECT_TRUE(reference::is_nan(reference::kBFloat16, reduce_values(COLLX_BFLOAT16, COLLX_SUM, H{0x7f80}, H{0xff80})[0]));
  using F = std::vector<float>;
  EXPECT_TRUE(std::isnan(reduce_values(COLLX_FLOAT32, COLLX_SUM, F{INFINITY}, F{-INFINITY})[0]));
}

TEST(ReduceHalf, RoundsTheFloat32ResultOnceToNearestEven) {
  using H = std::vector<uint16_t>;
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins. 2^-11 is 0x1000.
  EXPECT_EQ(reduce_values(COLLX_FLOAT16, COLLX_SUM, H{0x3c00}, H{0x1000}), (H{0x3c00}));
  // 1 + 2^-11 + 2^-21 is just above the tie. 2^-11 * (1 + 2^-10) is 0x1001.
  EXPECT_EQ(reduce_values(COLLX_FLOAT16, COLLX_SUM, H{0x3c00}, H{0x1001}), (H{0x3c01}));
  // 65504 + 16 = 65520 overflows to infinity; 65504 + 8 does not.
  EXPECT_EQ(reduce_values(COLLX_FLOAT16, COLLX_SUM, H{0x7bff, 0x7bff}, H{0x4c00, 0x4800}), (H{0x7c00, 0x7bff}));
  // Subnormal products: 2^-14 * 2^-10 = 2^-24 (the smallest subnormal); * 2^-11 is a tie to 0.
  EXPECT_EQ(reduce_values(COLLX_FLOAT16, COLLX_PROD, H{0x0400, 0x0400}, H{0x1400, 0x1000}), (H{0x0001, 0x0000}));
  // bfloat16: 1 + 2^-8 is a tie (to 1), 1 + 3 * 2^-8 is a tie (to 1 + 2^-6).
  EXPECT_EQ(reduce_values(COLLX_BFLOAT16, COLLX_SUM, H{0x3f80, 0x3f80}, H{0x3b80, 0x3c40}), (H{0x3f80, 0x3f82}));
}

// The vectorized conversions inside the kernels agree with the scalar ones on every pattern:
// MAX(x, x) is x, converted to float32 and back.
TEST(ReduceHalf, VectorizedConversionsMatchScalarOnEveryBitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_supported(isa)) continue;
    std::vector<uint16_t> half = all, bf16 = all;
    reduce_fn_for(isa, COLLX_FLOAT16, COLLX_MAX)(half.data(), all.data(), all.size());
    reduce_fn_for(isa, COLLX_BFLOAT16, COLLX_MAX)(bf16.data(), all.data(), all.size());
    for (uint32_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(half[i], float_to_half(half_to_float(all[i]))) << kernel_isa_name(isa) << std::hex << " " << i;
      ASSERT_EQ(bf16[i], float_to_bfloat16(bfloat16_to_float(all[i]))) << kernel_isa_name(isa) << std::hex << " " << i;
    }
  }
}

}  // namespace
}  // namespace collx
