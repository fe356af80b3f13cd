// Instruction-set variants of the host reduction kernels. reduce_fn/reduce3_fn pick the
// best variant the CPU supports (detected once at run time); the explicit forms here let
// tests and benchmarks run each variant side by side.
#pragma once

#include "lib/dtype/datatype.h"

// The x86 variant needs GCC/Clang target attributes and __builtin_cpu_supports.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define COLLX_DTYPE_X86_KERNELS 1
#else
#define COLLX_DTYPE_X86_KERNELS 0
#endif

namespace collx {

enum class KernelIsa {
  kPortable = 0,     // plain C++ for the compiler's baseline target (SSE2 on x86-64)
  kX86Avx2F16c = 1,  // the same loops compiled for AVX2, float16 through F16C conversions
};

constexpr KernelIsa kAllKernelIsas[] = {KernelIsa::kPortable, KernelIsa::kX86Avx2F16c};

const char* kernel_isa_name(KernelIsa isa);  // "portable", "x86-avx2-f16c"
// Compiled into this build and supported by this CPU (and OS).
bool kernel_isa_supported(KernelIsa isa);
// The variant reduce_fn/reduce3_fn use.
KernelIsa best_kernel_isa();

// nullptr when the variant is not supported here, or as reduce_fn/reduce3_fn.
ReduceFn reduce_fn_for(KernelIsa isa, collx_datatype_t datatype, collx_op_t op);
Reduce3Fn reduce3_fn_for(KernelIsa isa, collx_datatype_t datatype, collx_op_t op);

#if COLLX_DTYPE_X86_KERNELS
namespace x86_avx2_f16c {
// Defined in reduce_kernels_x86.cc; only to be called when the CPU supports AVX2 and F16C.
ReduceFn reduce_fn(collx_datatype_t datatype, collx_op_t op);
Reduce3Fn reduce3_fn(collx_datatype_t datatype, collx_op_t op);
bool cpu_supported();
}  // namespace x86_avx2_f16c
#endif

}  // namespace collx
