// Which tensors a rank counts in the global gradient norm, from the layout flags: copies
// that exist on every TP rank count on TP rank 0 only, tied copies only where asked.
#pragma once

#include <cstdint>

#include "collx/parallel.h"

namespace collx {
namespace parallel {

inline bool counts_in_norm(uint32_t flags, int32_t tp_rank, int32_t count_shared) {
  if ((flags & (COLLX_TENSOR_TP_REPLICATED | COLLX_TENSOR_SP_NORM)) && tp_rank != 0) return false;
  if ((flags & COLLX_TENSOR_SHARED) && !count_shared) return false;
  return true;
}

}  // namespace parallel
}  // namespace collx
