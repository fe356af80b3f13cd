// Local (no communication) helpers shared by the algorithms: reduction of an incoming chunk
// into an accumulator, the reduction kernels of a collective, and which ScratchPool slots
// the algorithms use.
#pragma once

#include <cstddef>
#include <cstring>

#include "algorithms/algorithm.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace algo {

// ScratchPool slots. One collective runs at a time per pool, so algorithms share them.
constexpr int kScratchIncoming = 0;  // receive buffers of data still to be reduced
constexpr int kScratchPartial = 1;   // partial results waiting to be sent on

// Bytes of a pipeline buffer slot holding `elems` elements, rounded up so every slot cut
// from one scratch allocation stays 64-byte aligned.
inline size_t slot_stride(size_t elems, size_t elem_size) {
  return (elems * elem_size + 63) & ~static_cast<size_t>(63);
}

struct Reducer {
  ReduceFn reduce = nullptr;    // dst = dst OP src
  Reduce3Fn reduce3 = nullptr;  // dst = a OP b

  // dst = mine OP incoming. `dst` is either `mine` itself (in place) or disjoint from it;
  // the operand order is the same either way, so in-place and out-of-place calls give
  // bit-identical results.
  void combine(void* dst, const void* mine, const void* incoming, size_t count) const {
    if (count == 0) return;
    if (dst == mine) {
      reduce(dst, incoming, count);
    } else {
      reduce3(dst, mine, incoming, count);
    }
  }
};

// The kernels for args.datatype and args.op; COLLX_ERR_INVALID_ARG for ops the core should
// have rewritten (AVG, PREMUL_SUM) or invalid values.
inline Status get_reducer(const CollArgs& args, Reducer* out) {
  out->reduce = reduce_fn(args.datatype, args.op);
  out->reduce3 = reduce3_fn(args.datatype, args.op);
  if (!out->reduce || !out->reduce3) {
    return make_status(COLLX_ERR_INVALID_ARG, "no reduction kernel for %s %s",
                       datatype_name(args.datatype), op_name(args.op));
  }
  return Status::Ok();
}

// Element size of args.datatype; COLLX_ERR_INVALID_ARG when the datatype is invalid.
inline Status get_elem_size(const CollArgs& args, size_t* out) {
  *out = datatype_size(args.datatype);
  if (*out == 0) return make_status(COLLX_ERR_INVALID_ARG, "invalid datatype %d", static_cast<int>(args.datatype));
  return Status::Ok();
}

inline void copy_if_distinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

// A scratch buffer of `bytes` from the communicator's pool slot `slot`: COLLX_ERR_NO_MEMORY
// when it cannot be allocated.
inline Status get_scratch(const Context& ctx, int slot, size_t bytes, char** out) {
  if (!ctx.scratch) return make_status(COLLX_ERR_INTERNAL, "algorithm called without a scratch pool");
  *out = static_cast<char*>(ctx.scratch->get(slot, bytes));
  if (!*out) return make_status(COLLX_ERR_NO_MEMORY, "cannot allocate %zu bytes of scratch", bytes);
  return Status::Ok();
}

}  // namespace algo
}  // namespace collx
