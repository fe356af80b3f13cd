// Input patterns and result checking for the #wrong column.
//
// Inputs are small integers that depend on the rank and the index, so that every result
// is exact in every datatype (bfloat16 holds integers up to 256 exactly, half up to 2048):
//  - reductions: (3*rank + i) % 4, minus 1 for signed and floating types (so avg on
//    integers exercises truncation toward zero);
//  - prod: 1 almost everywhere, 2 on one rank and 3 on another, so products stay at 2 or 6;
//  - data movement (allgather, broadcast, alltoall, gather, scatter, sendrecv):
//    (5*rank + 3*i) % 29, so a block delivered from the wrong rank is caught for up to 29 ranks;
//  - premulsum uses kPremulScalar, expected = kPremulScalar * sum.
// Outputs are poisoned (kPoison) before each checked call so stale data cannot pass.
// Floating results are compared with a relative tolerance of a few ulps of the type;
// integer results exactly, after wrapping the expected value to the type's width.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/collx_bench/names.h"

namespace collx_bench {

constexpr double kPremulScalar = 2.0;
constexpr double kPoison = 111.0;

// Everything that determines the buffers of one call on one rank.
struct CallShape {
  BenchColl coll = BenchColl::kAllreduce;
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  size_t count = 0;  // the call's count argument (per rank for RS/AG/alltoall)
};

// Element conversions for every collx datatype (half and bfloat16 round to nearest even).
double load_element(collx_datatype_t datatype, const void* buf, size_t index);
void store_element(collx_datatype_t datatype, void* buf, size_t index, double value);
// The value `value` becomes once stored in `datatype` (integers wrap to the type's width).
double round_to_type(collx_datatype_t datatype, double value);

// The value rank `rank` contributes at index `index`.
double input_value(const CallShape& s, int rank, size_t index);

// Fills this rank's inputs and poisons its outputs. Out of place: `send` and `recv` are the
// buffers of the call. In place: `buf` is the single buffer (the caller derives the send
// and receive pointers from it as collx.h documents for each collective).
void fill_out_of_place(const CallShape& s, void* send, void* recv);
void fill_in_place(const CallShape& s, void* buf);

// Counts this rank's wrong output elements after the call (0 for ranks with no output,
// such as non-roots of reduce).
int64_t count_wrong_out_of_place(const CallShape& s, const void* recv);
int64_t count_wrong_in_place(const CallShape& s, const void* buf);

}  // namespace collx_bench
