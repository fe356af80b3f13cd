#include "bindings/torch/csrc/type_map.h"

#include "bindings/torch/csrc/collx_error.h"

namespace collx_torch {

collx_datatype_t to_collx_datatype(at::ScalarType type, const std::string& what) {
  switch (type) {
    case at::kFloat: return COLLX_FLOAT32;
    case at::kDouble: return COLLX_FLOAT64;
    case at::kHalf: return COLLX_FLOAT16;
    case at::kBFloat16: return COLLX_BFLOAT16;
    case at::kChar: return COLLX_INT8;
    case at::kByte: return COLLX_UINT8;
    case at::kInt: return COLLX_INT32;
    case at::kLong: return COLLX_INT64;
    default:
      throw_unsupported(what, std::string("tensors of dtype ") + c10::toString(type) +
                                  " are not supported (collx takes float32, float64, float16, "
                                  "bfloat16, int8, uint8, int32 and int64)");
  }
}

namespace {

double premul_factor(const c10d::ReduceOp& op, const std::string& what) {
  auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (!supplement) throw_invalid(what, "PREMUL_SUM carries no factor");
  if (supplement->tensor_factors.empty()) return supplement->double_factor;
  const at::Tensor& factor = supplement->tensor_factors.front();
  if (factor.numel() != 1) {
    throw_unsupported(what, "PREMUL_SUM with a factor tensor of " + std::to_string(factor.numel()) +
                                " elements (collx takes one scalar factor)");
  }
  return factor.item<double>();
}

}  // namespace

CollxOp to_collx_op(const c10d::ReduceOp& op, const std::string& what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return {COLLX_SUM, 1.0};
    case c10d::ReduceOp::PRODUCT: return {COLLX_PROD, 1.0};
    case c10d::ReduceOp::MIN: return {COLLX_MIN, 1.0};
    case c10d::ReduceOp::MAX: return {COLLX_MAX, 1.0};
    case c10d::ReduceOp::AVG: return {COLLX_AVG, 1.0};
    case c10d::ReduceOp::PREMUL_SUM: return {COLLX_PREMUL_SUM, premul_factor(op, what)};
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      throw_unsupported(what, "bitwise reduce ops (BAND, BOR, BXOR) are not supported; collx "
                              "reduces with SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM");
    default:
      throw_invalid(what, "unknown reduce op " + std::to_string(static_cast<int>(op.op_)));
  }
}

const at::Tensor& checked(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) throw_invalid(what, "a tensor argument is undefined (None)");
  if (!tensor.device().is_cpu()) {
    throw_unsupported(what, "tensor on device " + tensor.device().str() +
                                "; the collx torch backend takes CPU tensors");
  }
  if (tensor.is_sparse() || tensor.layout() != at::kStrided) {
    throw_unsupported(what, "sparse tensors are not supported");
  }
  if (!tensor.is_contiguous()) {
    throw_invalid(what, "tensor is not contiguous; pass tensor.contiguous()");
  }
  return tensor;
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.size() != 1) {
    throw_invalid(what, "takes exactly one tensor per process, got " + std::to_string(tensors.size()));
  }
  return checked(tensors.front(), what);
}

void check_same_shape(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t expected,
                      const std::string& what) {
  if (list.size() != expected) {
    throw_invalid(what, "tensor list has " + std::to_string(list.size()) + " tensors; expected " +
                            std::to_string(expected) + " (one per rank)");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    checked(list[i], what);
    if (list[i].scalar_type() != like.scalar_type() || list[i].numel() != like.numel()) {
      throw_invalid(what, "tensor " + std::to_string(i) + " of the list has dtype " +
                              c10::toString(list[i].scalar_type()) + " and " +
                              std::to_string(list[i].numel()) + " elements; expected " +
                              c10::toString(like.scalar_type()) + " and " +
                              std::to_string(like.numel()) + " like the other tensor argument");
    }
  }
}

}  // namespace collx_torch
