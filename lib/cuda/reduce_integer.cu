// Pairwise device reductions of the integer datatypes.
#include "lib/cuda/reduce_kernels.cuh"

namespace collx {
namespace cuda {
namespace kernels {

Status reduce2_integer(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype,
                       collx_op_t op, cudaStream_t stream) {
  switch (datatype) {
    case COLLX_INT8: return launch_reduce2_op<int8_t>(dst, a, b, count, op, stream);
    case COLLX_UINT8: return launch_reduce2_op<uint8_t>(dst, a, b, count, op, stream);
    case COLLX_INT32: return launch_reduce2_op<int32_t>(dst, a, b, count, op, stream);
    case COLLX_UINT32: return launch_reduce2_op<uint32_t>(dst, a, b, count, op, stream);
    case COLLX_INT64: return launch_reduce2_op<int64_t>(dst, a, b, count, op, stream);
    case COLLX_UINT64: return launch_reduce2_op<uint64_t>(dst, a, b, count, op, stream);
    default: return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: datatype %d is not an integer", datatype);
  }
}

}  // namespace kernels
}  // namespace cuda
}  // namespace collx
