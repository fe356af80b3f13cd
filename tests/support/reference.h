// Inputs whose reductions are exact in every datatype (small integers: sums stay below 256,
// products of +-1 and at most one 2 or 3), element access by datatype, and the reference
// result of each reduction computed in double precision.
#pragma once

#include <cstddef>
#include <string>

#include "collx/collx.h"

namespace collx {
namespace testing {

// Value of element `index` of rank `rank`'s input for `op` (index is the position in that
// rank's send buffer). `salt` varies inputs between cases.
double input_value(int rank, size_t index, collx_op_t op, collx_datatype_t datatype, unsigned salt = 0);

void store_value(void* buffer, size_t index, collx_datatype_t datatype, double value);
double load_value(const void* buffer, size_t index, collx_datatype_t datatype);

// Fill `count` elements of `buffer` with input_value(rank, first_index + i, ...).
void fill_input(void* buffer, size_t count, size_t first_index, int rank, collx_op_t op,
                collx_datatype_t datatype, unsigned salt = 0);

// The reduction over `size` ranks of input_value(r, index, ...), as collx defines the op
// (AVG: integer truncation toward zero; PREMUL_SUM: each input times `premul`).
double reference_reduce(collx_op_t op, collx_datatype_t datatype, int size, size_t index,
                        double premul = 1.0, unsigned salt = 0);

// Exact for integers and exact-by-construction cases; AVG on floats allows one rounding.
bool values_match(double expected, double got, collx_datatype_t datatype, collx_op_t op);

// "float32" etc. for traces.
std::string case_name(collx_datatype_t datatype, collx_op_t op, size_t count, bool in_place);

}  // namespace testing
}  // namespace collx
