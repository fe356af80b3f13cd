// The two implementations behind lib/cuda/device.h: native (device.cc, reduce_n.cu: the CUDA
// runtime, or stubs without CUDA) and emu (emu_*.cc: the emulated test device). dispatch.cc
// picks one per process; nothing else calls these directly.
#pragma once

#include "lib/cuda/device.h"

namespace collx {
namespace cuda {

namespace native {
bool built_with_cuda();
#include "lib/cuda/backend_api.inc"
}  // namespace native

namespace emu {
// True when COLLX_TEST_DEVICE=emulated (read once per process; logs a warning then).
bool active();
#include "lib/cuda/backend_api.inc"
}  // namespace emu

// Arguments of cuda_reduce_n both backends reject alike (counts of inputs and outputs, op,
// divisor, NULL buffers).
Status check_reduce_n_args(void* const* outputs, int n_out, const void* const* inputs, int n, collx_op_t op,
                           int64_t divisor);

}  // namespace cuda
}  // namespace collx
