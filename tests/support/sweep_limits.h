// How large the reference sweeps go, shared by the fast tier, the algorithm tests and the
// kernel tests.
//
// Sanitized builds run 2-3x (ASan + UBSan) to 5-15x (TSan) slower and look for memory errors
// and races, not arithmetic: there the large count is 64K + 3 elements, which still spans
// many kernel vector blocks, several chunks at the chunk sizes the sweeps force, pipelining,
// rendezvous sends and uneven blocks. The plain build checks the arithmetic at 1M + 3.
#pragma once

#include <cstddef>

#include "collx/collx.h"

namespace collx {
namespace testing {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizedBuild = true;
constexpr size_t kLargeSweepCount = (size_t{1} << 16) + 3;
#else
constexpr bool kSanitizedBuild = false;
constexpr size_t kLargeSweepCount = (size_t{1} << 20) + 3;
#endif

// Every (datatype, op) pair runs at small counts, where each element's arithmetic is checked;
// from 64K elements (chunking, pipelining, rendezvous, uneven blocks) a few pairs that
// together cover every element size (1, 2, 4, 8 bytes) and every op. The full cross product
// at large counts cost minutes of reference arithmetic and found nothing more.
inline bool large_count_pair_wanted(size_t count, collx_datatype_t dt, collx_op_t op) {
  if (count < (size_t{1} << 16)) return true;
  static const struct {
    collx_datatype_t dt;
    collx_op_t op;
  } kLarge[] = {{COLLX_FLOAT32, COLLX_SUM},        {COLLX_FLOAT64, COLLX_AVG}, {COLLX_BFLOAT16, COLLX_SUM},
                {COLLX_FLOAT16, COLLX_PREMUL_SUM}, {COLLX_INT32, COLLX_MAX},   {COLLX_UINT8, COLLX_MIN},
                {COLLX_INT64, COLLX_PROD}};
  for (const auto& pair : kLarge) {
    if (pair.dt == dt && pair.op == op) return true;
  }
  return false;
}

}  // namespace testing
}  // namespace collx
