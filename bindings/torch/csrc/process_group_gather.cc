// The gathering and scattering collectives of ProcessGroupCollx. torch's list forms (one
// tensor per rank) are staged through one flat buffer, since collx collectives take one
// contiguous buffer; the flat "_base" forms hand torch's buffers to collx directly. Gather and
// scatter stage only on the root (non-roots pass their own tensor and NULL for the list).
#include "bindings/torch/csrc/collx_error.h"
#include "bindings/torch/csrc/process_group.h"
#include "bindings/torch/csrc/type_map.h"

namespace collx_torch {

namespace {

// The tensors of `list`, flattened and laid end to end in one new contiguous tensor.
at::Tensor concat_flat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const at::Tensor& tensor : list) flat.push_back(tensor.reshape({-1}));
  return at::cat(flat);
}

// Block i of `flat` (each `outputs[i]`'s element count) into outputs[i].
void copy_blocks_out(const at::Tensor& flat, const std::vector<at::Tensor>& outputs) {
  int64_t offset = 0;
  for (const at::Tensor& output : outputs) {
    const int64_t count = output.numel();
    output.view({-1}).copy_(flat.narrow(0, offset, count));
    offset += count;
  }
}

at::Tensor flat_like(const at::Tensor& like, int64_t blocks) {
  return at::empty({blocks * like.numel()}, like.options());
}

// The flat forms' two tensors: both usable by collx, of one dtype, `big` holding `size`
// times the elements of `small`.
void check_flat_pair(const at::Tensor& big, const at::Tensor& small, int64_t size, const char* big_name,
                     const std::string& what) {
  checked(big, what);
  checked(small, what);
  if (big.scalar_type() != small.scalar_type()) {
    throw_invalid(what, std::string(big_name) + " has dtype " + c10::toString(big.scalar_type()) +
                            ", the other tensor " + c10::toString(small.scalar_type()));
  }
  if (big.numel() != size * small.numel()) {
    throw_invalid(what, std::string(big_name) + " has " + std::to_string(big.numel()) +
                            " elements; expected world size " + std::to_string(size) + " x " +
                            std::to_string(small.numel()));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const std::string what = "all_gather";
  const at::Tensor& input = single(inputs, what);
  if (outputs.size() != 1) throw_invalid(what, "takes exactly one output list per process");
  check_same_shape(outputs[0], input, getSize(), what);
  collx_datatype_t type = to_collx_datatype(input.scalar_type(), what);
  at::Tensor flat = flat_like(input, getSize());
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_iallgather(input.data_ptr(), flat.data_ptr(), input.numel(), type, comm_, o, request);
  };
  std::vector<at::Tensor> results = outputs[0];
  return enqueue({c10d::OpType::ALLGATHER, what, opts.timeout, {}}, post, results, {input, flat},
                 [flat, results] { copy_blocks_out(flat, results); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  const std::string what = "all_gather_into_tensor";
  check_flat_pair(output, input, getSize(), "the output tensor", what);
  collx_datatype_t type = to_collx_datatype(input.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_iallgather(input.data_ptr(), output.data_ptr(), input.numel(), type, comm_, o, request);
  };
  return enqueue({c10d::OpType::_ALLGATHER_BASE, what, opts.timeout, {}}, post, {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const std::string what = "gather";
  const at::Tensor& input = single(inputs, what);
  check_rank(opts.rootRank, "root", what);
  const bool is_root = getRank() == opts.rootRank;
  std::vector<at::Tensor> results;
  if (is_root) {
    if (outputs.size() != 1) throw_invalid(what, "takes exactly one output list on the root");
    check_same_shape(outputs[0], input, getSize(), what);
    results = outputs[0];
  } else if (!outputs.empty() && !outputs[0].empty()) {
    throw_invalid(what, "output tensors given on rank " + std::to_string(getRank()) +
                            ", which is not the root (" + std::to_string(opts.rootRank) + ")");
  }
  collx_datatype_t type = to_collx_datatype(input.scalar_type(), what);
  // Only the root receives: it gathers into a staging tensor, the others pass no buffer.
  at::Tensor flat = is_root ? flat_like(input, getSize()) : at::Tensor();
  void* recv = is_root ? flat.data_ptr() : nullptr;
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_igather(input.data_ptr(), recv, input.numel(), type, static_cast<int32_t>(opts.rootRank),
                         comm_, o, request);
  };
  if (!is_root) return enqueue({c10d::OpType::GATHER, what, opts.timeout, {}}, post, results, {input});
  return enqueue({c10d::OpType::GATHER, what, opts.timeout, {}}, post, results, {input, flat},
                 [flat, results] { copy_blocks_out(flat, results); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const std::string what = "scatter";
  const at::Tensor& output = single(outputs, what);
  check_rank(opts.rootRank, "root", what);
  // Only the root sends: its list is laid end to end in one staging tensor; the others pass
  // no buffer. collx writes straight into each rank's (contiguous) output tensor.
  at::Tensor flat;
  if (getRank() == opts.rootRank) {
    if (inputs.size() != 1) throw_invalid(what, "takes exactly one input list on the root");
    check_same_shape(inputs[0], output, getSize(), what);
    flat = concat_flat(inputs[0]);
  } else if (!inputs.empty() && !inputs[0].empty()) {
    throw_invalid(what, "input tensors given on rank " + std::to_string(getRank()) +
                            ", which is not the root (" + std::to_string(opts.rootRank) + ")");
  }
  collx_datatype_t type = to_collx_datatype(output.scalar_type(), what);
  const void* send = flat.defined() ? flat.data_ptr() : nullptr;
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_iscatter(send, output.data_ptr(), output.numel(), type, static_cast<int32_t>(opts.rootRank),
                          comm_, o, request);
  };
  if (!flat.defined()) return enqueue({c10d::OpType::SCATTER, what, opts.timeout, {}}, post, outputs, {output});
  return enqueue({c10d::OpType::SCATTER, what, opts.timeout, {}}, post, outputs, {flat, output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const std::string what = "reduce_scatter";
  const at::Tensor& output = single(outputs, what);
  if (inputs.size() != 1) throw_invalid(what, "takes exactly one input list per process");
  check_same_shape(inputs[0], output, getSize(), what);
  collx_datatype_t type = to_collx_datatype(output.scalar_type(), what);
  CollxOp op = to_collx_op(opts.reduceOp, what);
  at::Tensor flat = concat_flat(inputs[0]);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ireduce_scatter(flat.data_ptr(), output.data_ptr(), output.numel(), type, op.op, comm_, o,
                                 request);
  };
  return enqueue({c10d::OpType::REDUCE_SCATTER, what, opts.timeout, op}, post, outputs, {flat, output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const std::string what = "reduce_scatter_tensor";
  check_flat_pair(input, output, getSize(), "the input tensor", what);
  collx_datatype_t type = to_collx_datatype(output.scalar_type(), what);
  CollxOp op = to_collx_op(opts.reduceOp, what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ireduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(), type, op.op, comm_, o,
                                 request);
  };
  return enqueue({c10d::OpType::_REDUCE_SCATTER_BASE, what, opts.timeout, op}, post, {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_split_sizes,
                                                                std::vector<int64_t>& input_split_sizes,
                                                                const c10d::AllToAllOptions& opts) {
  const std::string what = "all_to_all_single";
  check_flat_pair(output, input, 1, "the output tensor", what);
  const int64_t rows = input.dim() > 0 ? input.size(0) : 1;
  if (rows % getSize() != 0) {
    throw_invalid(what, "the input's first dimension (" + std::to_string(rows) +
                            ") does not divide by the world size " + std::to_string(getSize()));
  }
  for (const std::vector<int64_t>* splits : {&output_split_sizes, &input_split_sizes}) {
    if (!splits->empty() && splits->size() != static_cast<size_t>(getSize())) {
      throw_invalid(what, "a split size list has " + std::to_string(splits->size()) +
                              " entries; expected one per rank (" + std::to_string(getSize()) + ")");
    }
    for (int64_t split : *splits) {
      if (split != rows / getSize()) {
        throw_unsupported(what, "uneven split sizes are not supported; collx exchanges equal "
                                "blocks (pass no split sizes, or all equal to " +
                                    std::to_string(rows / getSize()) + ")");
      }
    }
  }
  collx_datatype_t type = to_collx_datatype(input.scalar_type(), what);
  // collx's all-to-all is out of place only: stage an input that shares the output's memory.
  at::Tensor source = input.data_ptr() == output.data_ptr() ? input.clone() : input;
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ialltoall(source.data_ptr(), output.data_ptr(), source.numel() / getSize(), type, comm_, o,
                           request);
  };
  return enqueue({c10d::OpType::ALLTOALL_BASE, what, opts.timeout, {}}, post, {output}, {source, output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  const std::string what = "all_to_all";
  if (inputs.empty()) throw_invalid(what, "the input list is empty");
  const at::Tensor& like = checked(inputs[0], what);
  check_same_shape(inputs, like, getSize(), what);
  check_same_shape(outputs, like, getSize(), what);
  collx_datatype_t type = to_collx_datatype(like.scalar_type(), what);
  at::Tensor source = concat_flat(inputs);
  at::Tensor flat = at::empty_like(source);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ialltoall(source.data_ptr(), flat.data_ptr(), like.numel(), type, comm_, o, request);
  };
  return enqueue({c10d::OpType::ALLTOALL, what, opts.timeout, {}}, post, outputs, {source, flat},
                 [flat, outputs] { copy_blocks_out(flat, outputs); });
}

}  // namespace collx_torch
