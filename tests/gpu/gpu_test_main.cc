// main() of the GPU tests: exits 77 (ctest's SKIP_RETURN_CODE) with the reason when the test
// cannot run here; no-device tests (COLLX_GPU_TEST_WITHOUT_DEVICE) skip where a GPU exists.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lib/cuda/device.h"

int main(int argc, char** argv) {
  std::string why;
  const int devices = collx::cuda::device_count(&why);
#if COLLX_GPU_TEST_WITHOUT_DEVICE
  if (devices > 0) {
    std::printf("SKIP: %d CUDA device(s) present; this test checks the behaviour without one\n", devices);
    return 77;
  }
#else
  if (devices == 0) {
    std::printf("SKIP: no usable CUDA device (%s); run bench/gpu/check.sh on a GPU machine\n", why.c_str());
    return 77;
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
