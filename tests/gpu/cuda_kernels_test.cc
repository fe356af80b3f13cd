// The CUDA reduction kernels against the host kernels (lib/dtype), bit for bit: every
// datatype and op, empty / tiny / odd / large counts, 16-byte aligned and misaligned buffers.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {
namespace {

const collx_op_t kPairOps[] = {COLLX_SUM, COLLX_PROD, COLLX_MIN, COLLX_MAX};

// Random finite values: floats in [-8, 8) (their rounding is the same on host and device),
// integers as random bits.
std::vector<uint8_t> random_data(collx_datatype_t dt, size_t count, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-8.0, 8.0);
  const size_t element = datatype_size(dt);
  std::vector<uint8_t> out(count * element);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * element;
    const double v = real(rng);
    switch (dt) {
      case COLLX_FLOAT16: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case COLLX_BFLOAT16: { uint16_t h = float_to_bfloat16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case COLLX_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case COLLX_FLOAT64: std::memcpy(p, &v, 8); break;
      default: { uint64_t bits = rng(); std::memcpy(p, &bits, element); break; }
    }
  }
  return out;
}

std::string label(collx_datatype_t dt, collx_op_t op, size_t count, size_t offset) {
  return std::string(datatype_name(dt)) + " " + op_name(op) + " count " + std::to_string(count) + " offset " +
         std::to_string(offset);
}

TEST(CudaReduce, EveryDatatypeAndOpMatchesTheHostKernels) {
  const size_t counts[] = {0, 1, 7, 4097, (1u << 20) + 5};
  for (int d = 0; d < COLLX_NUM_DATATYPES; ++d) {
    const auto dt = static_cast<collx_datatype_t>(d);
    const size_t element = datatype_size(dt);
    for (collx_op_t op : kPairOps) {
      for (size_t count : counts) {
        for (size_t offset : {size_t{0}, size_t{1}}) {  // elements; 1 defeats the 16-byte loads
          const std::string what = label(dt, op, count, offset);
          auto a = random_data(dt, count + offset, 11u * static_cast<unsigned>(count) + d);
          auto b = random_data(dt, count + offset, 13u * static_cast<unsigned>(count) + d + 1);
          std::vector<uint8_t> want(a.size());
          reduce3_fn(dt, op)(want.data() + offset * element, a.data() + offset * element, b.data() + offset * element,
                             count);
          DeviceBuffer da(a.size(), a.data()), db(b.size(), b.data()), dd(a.size());
          ASSERT_TRUE(da.ok() && db.ok() && dd.ok()) << what;
          Status st = cuda::cuda_reduce(dd.get() + offset * element, da.get() + offset * element,
                                        db.get() + offset * element, count, dt, op, nullptr);
          ASSERT_TRUE(st.ok()) << what << ": " << st.message();
          ASSERT_TRUE(cuda::device_synchronize().ok()) << what;
          auto got = dd.read(offset * element, count * element);
          ASSERT_EQ(got.size(), count * element) << what;
          EXPECT_TRUE(got.empty() || std::memcmp(got.data(), want.data() + offset * element, got.size()) == 0) << what;
          // In place (dst == a).
          st = cuda::cuda_reduce(da.get() + offset * element, da.get() + offset * element, db.get() + offset * element,
                                 count, dt, op, nullptr);
          ASSERT_TRUE(st.ok() && cuda::device_synchronize().ok()) << what;
          got = da.read(offset * element, count * element);
          EXPECT_TRUE(got.empty() || std::memcmp(got.data(), want.data() + offset * element, got.size()) == 0)
              << what << " in place";
        }
      }
    }
  }
}

TEST(CudaReduce, RejectsAvgAndUnknownOps) {
  DeviceBuffer a(64), b(64);
  ASSERT_TRUE(a.ok() && b.ok());
  Status st = cuda::cuda_reduce(a.get(), a.get(), b.get(), 4, COLLX_FLOAT32, COLLX_AVG, nullptr);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("AVG"), std::string::npos) << st.message();
}

// cuda_reduce_n folds n inputs with every op; exact data makes the host fold (pairwise, with
// scale and divide) the reference bit for bit.
TEST(CudaReduceN, EveryDatatypeOpAndInputCountMatchesTheHostFold) {
  const size_t count = 3001;
  for (int d = 0; d < COLLX_NUM_DATATYPES; ++d) {
    const auto dt = static_cast<collx_datatype_t>(d);
    const size_t bytes = count * datatype_size(dt);
    for (int o = 0; o < COLLX_NUM_OPS; ++o) {
      const auto op = static_cast<collx_op_t>(o);
      for (int n = 1; n <= 4; ++n) {
        const std::string what = std::string(datatype_name(dt)) + " " + op_name(op) + " n=" + std::to_string(n);
        std::vector<std::vector<uint8_t>> in;
        std::vector<std::unique_ptr<DeviceBuffer>> dev;
        std::vector<const void*> ptrs;
        for (int j = 0; j < n; ++j) {
          in.push_back(exact_data(dt, count, j, 5));
          dev.push_back(std::make_unique<DeviceBuffer>(bytes, in.back().data()));
          ASSERT_TRUE(dev.back()->ok()) << what;
          ptrs.push_back(dev.back()->get());
        }
        const collx_op_t base = (op == COLLX_AVG || op == COLLX_PREMUL_SUM) ? COLLX_SUM : op;
        std::vector<uint8_t> want(bytes), term(bytes);
        if (op == COLLX_PREMUL_SUM) scale(want.data(), in[0].data(), count, dt, 2.0);
        else want = in[0];
        for (int j = 1; j < n; ++j) {
          if (op == COLLX_PREMUL_SUM) scale(term.data(), in[static_cast<size_t>(j)].data(), count, dt, 2.0);
          else term = in[static_cast<size_t>(j)];
          reduce3_fn(dt, base)(want.data(), want.data(), term.data(), count);
        }
        if (op == COLLX_AVG) divide(want.data(), count, dt, n);
        DeviceBuffer out(bytes), out2(bytes);
        void* outs[2] = {out.get(), out2.get()};
        Status st = cuda::cuda_reduce_n(outs, 2, ptrs.data(), n, count, dt, op, 2.0, n, nullptr);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message();
        ASSERT_TRUE(cuda::device_synchronize().ok()) << what;
        auto got = out.read(0, bytes);
        EXPECT_TRUE(bytes == 0 || std::memcmp(got.data(), want.data(), bytes) == 0) << what;
        got = out2.read(0, bytes);
        EXPECT_TRUE(bytes == 0 || std::memcmp(got.data(), want.data(), bytes) == 0) << what << " (second output)";
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace collx
