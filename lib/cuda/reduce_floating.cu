// Pairwise device reductions of the floating-point datatypes.
#include "lib/cuda/reduce_kernels.cuh"

namespace collx {
namespace cuda {
namespace kernels {

Status reduce2_floating(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype,
                        collx_op_t op, cudaStream_t stream) {
  switch (datatype) {
    case COLLX_FLOAT16: return launch_reduce2_op<__half>(dst, a, b, count, op, stream);
    case COLLX_BFLOAT16: return launch_reduce2_op<__nv_bfloat16>(dst, a, b, count, op, stream);
    case COLLX_FLOAT32: return launch_reduce2_op<float>(dst, a, b, count, op, stream);
    case COLLX_FLOAT64: return launch_reduce2_op<double>(dst, a, b, count, op, stream);
    default: return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: datatype %d is not floating point", datatype);
  }
}

}  // namespace kernels
}  // namespace cuda
}  // namespace collx
