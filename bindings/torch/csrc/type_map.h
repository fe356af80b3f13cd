// How torch tensors and reduce ops map onto collx datatypes and ops, and the checks a tensor
// must pass before its memory is handed to collx (dense, contiguous, on the CPU).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "collx/collx.h"

namespace collx_torch {

// float32/64, float16, bfloat16, int8, uint8, int32, int64. Other dtypes (bool, int16,
// complex, quantized) are COLLX_ERR_UNSUPPORTED naming the dtype.
collx_datatype_t to_collx_datatype(at::ScalarType type, const std::string& what);

// A reduce op and the scalar COLLX_PREMUL_SUM needs.
struct CollxOp {
  collx_op_t op = COLLX_SUM;
  double premul_scalar = 1.0;
};
// SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM (a scalar factor, or a one-element tensor
// factor). BAND, BOR and BXOR are COLLX_ERR_UNSUPPORTED.
CollxOp to_collx_op(const c10d::ReduceOp& op, const std::string& what);

// Checks that `tensor` is a dense, contiguous CPU tensor and returns it; COLLX_ERR_INVALID_ARG
// or COLLX_ERR_UNSUPPORTED naming `what` and the offending property otherwise.
const at::Tensor& checked(const at::Tensor& tensor, const std::string& what);

// The single tensor of a one-tensor-per-process argument (CPU process groups take exactly one).
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& what);

// Checks that every tensor of `list` has `like`'s dtype and element count (torch's lists of
// per-rank tensors) and that there are `expected` of them.
void check_same_shape(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t expected,
                      const std::string& what);

}  // namespace collx_torch
