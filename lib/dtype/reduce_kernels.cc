// Host reduction kernels: dst = dst OP src and dst = a OP b for every datatype and the four
// elementwise ops. This file holds the portable variant (the loops of reduce_loops.h for
// the compiler's baseline target) and the dispatch to the best variant for this CPU.
//
// The optimize pragma keeps the loops vectorized even when the rest of the build uses a
// lower level (Debug).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "lib/dtype/datatype.h"
#include "lib/dtype/kernel_isa.h"
#include "lib/dtype/reduce_loops.h"

namespace collx {

namespace {

using PortableReduce = reduce_loops::Table<reduce_loops::Reduce2, ReduceFn>;
using PortableReduce3 = reduce_loops::Table<reduce_loops::Reduce3, Reduce3Fn>;

}  // namespace

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable: return "portable";
    case KernelIsa::kX86Avx2F16c: return "x86-avx2-f16c";
  }
  return "unknown";
}

bool kernel_isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable: return true;
    case KernelIsa::kX86Avx2F16c:
#if COLLX_DTYPE_X86_KERNELS
      return x86_avx2_f16c::cpu_supported();
#else
      return false;
#endif
  }
  return false;
}

KernelIsa best_kernel_isa() {
  // Detected once; a function-local static is initialized thread-safely.
  static const KernelIsa best = kernel_isa_supported(KernelIsa::kX86Avx2F16c) ? KernelIsa::kX86Avx2F16c
                                                                                : KernelIsa::kPortable;
  return best;
}

ReduceFn reduce_fn_for(KernelIsa isa, collx_datatype_t datatype, collx_op_t op) {
  if (!kernel_isa_supported(isa)) return nullptr;
#if COLLX_DTYPE_X86_KERNELS
  if (isa == KernelIsa::kX86Avx2F16c) return x86_avx2_f16c::reduce_fn(datatype, op);
#endif
  return PortableReduce::lookup(datatype, op);
}

Reduce3Fn reduce3_fn_for(KernelIsa isa, collx_datatype_t datatype, collx_op_t op) {
  if (!kernel_isa_supported(isa)) return nullptr;
#if COLLX_DTYPE_X86_KERNELS
  if (isa == KernelIsa::kX86Avx2F16c) return x86_avx2_f16c::reduce3_fn(datatype, op);
#endif
  return PortableReduce3::lookup(datatype, op);
}

ReduceFn reduce_fn(collx_datatype_t datatype, collx_op_t op) {
  return reduce_fn_for(best_kernel_isa(), datatype, op);
}

Reduce3Fn reduce3_fn(collx_datatype_t datatype, collx_op_t op) {
  return reduce3_fn_for(best_kernel_isa(), datatype, op);
}

}  // namespace collx
