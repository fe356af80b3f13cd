// Argument checks of device.h's element-wise operations, made once in dispatch.cc before
// either backend runs: every bad argument is a COLLX_ERR_INVALID_ARG naming it (the kernels
// and the emulator then assume valid arguments).
#pragma once

#include "lib/cuda/device.h"

namespace collx {
namespace cuda {

Status check_cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n);
Status check_accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n);
Status check_sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out);
Status check_nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, int32_t* dev_flag);
Status check_adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n,
                        const OptimizerStep& s, void* param_out, collx_datatype_t param_dtype);
Status check_sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& s,
                      void* param_out, collx_datatype_t param_dtype);
Status check_copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows);

}  // namespace cuda
}  // namespace collx
