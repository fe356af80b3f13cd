// The public device utilities (include/collx/device.h): memory allocated, filled and read
// back through collx_device_memcpy in every direction, ordered on a stream only by the
// stream (the emulated tier delays each queued operation at random, so a copy that is not
// ordered after the one before it reads stale data), and the bad arguments refused with a
// status and a message naming them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "lib/cuda/device.h"

namespace collx {
namespace testing {
namespace {

TEST(DeviceApi, CopiesRoundTripInEveryDirectionInStreamOrder) {
  void* stream = nullptr;
  ASSERT_TRUE(cuda::stream_create(&stream).ok());
  constexpr size_t kN = 1000;
  std::vector<uint32_t> in(kN), out(kN, 0);
  std::iota(in.begin(), in.end(), 7u);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(collx_device_alloc(kN * 4, &a), COLLX_OK) << collx_last_error(nullptr);
  ASSERT_EQ(collx_device_alloc(kN * 4, &b), COLLX_OK) << collx_last_error(nullptr);
  EXPECT_EQ(cuda::pointer_kind(a), COLLX_MEM_CUDA);
  ASSERT_EQ(collx_device_memcpy(a, in.data(), kN * 4, stream), COLLX_OK) << collx_last_error(nullptr);
  ASSERT_EQ(collx_device_memcpy(b, a, kN * 4, stream), COLLX_OK) << collx_last_error(nullptr);
  ASSERT_EQ(collx_device_memcpy(out.data(), b, kN * 4, stream), COLLX_OK) << collx_last_error(nullptr);
  ASSERT_EQ(collx_device_stream_synchronize(stream), COLLX_OK) << collx_last_error(nullptr);
  EXPECT_EQ(out, in);
  EXPECT_EQ(collx_device_memcpy(out.data(), b, 0, stream), COLLX_OK);  // nothing queued
  EXPECT_EQ(collx_device_free(a), COLLX_OK);
  EXPECT_EQ(collx_device_free(b), COLLX_OK);
  cuda::stream_destroy(stream);
}

TEST(DeviceApi, TheDefaultStreamWorksToo) {
  std::vector<float> in = {1.5f, -2.0f, 3.25f}, out(3, 0.0f);
  void* d = nullptr;
  ASSERT_EQ(collx_device_alloc(sizeof(float) * 3, &d), COLLX_OK) << collx_last_error(nullptr);
  ASSERT_EQ(collx_device_memcpy(d, in.data(), sizeof(float) * 3, nullptr), COLLX_OK);
  ASSERT_EQ(collx_device_memcpy(out.data(), d, sizeof(float) * 3, nullptr), COLLX_OK);
  ASSERT_EQ(collx_device_stream_synchronize(nullptr), COLLX_OK) << collx_last_error(nullptr);
  EXPECT_EQ(out, in);
  EXPECT_EQ(collx_device_free(d), COLLX_OK);
}

void expect_refused(collx_status_t st, const char* names) {
  EXPECT_EQ(st, COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find(names), std::string::npos) << collx_last_error(nullptr);
}

TEST(DeviceApi, BadArgumentsAreNamed) {
  void* d = reinterpret_cast<void*>(uintptr_t{1});
  expect_refused(collx_device_alloc(0, &d), "bytes is 0");
  EXPECT_EQ(d, nullptr);
  expect_refused(collx_device_alloc(16, nullptr), "ptr");
  char host_a[8] = {}, host_b[8] = {};
  expect_refused(collx_device_memcpy(host_a, host_b, sizeof host_a, nullptr), "neither dst nor src is device memory");
  expect_refused(collx_device_memcpy(nullptr, host_b, sizeof host_b, nullptr), "dst is NULL");
  expect_refused(collx_device_memcpy(host_a, nullptr, sizeof host_a, nullptr), "src is NULL");
  EXPECT_EQ(collx_device_free(nullptr), COLLX_OK);
}

}  // namespace
}  // namespace testing
}  // namespace collx
