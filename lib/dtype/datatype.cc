// Sizes and names of datatypes and reduction operations.
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

// Indexed by collx_datatype_t / collx_op_t; the static_asserts keep them in step with the
// public enums when a value is appended.
constexpr size_t kDatatypeSizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
constexpr const char* kDatatypeNames[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
constexpr const char* kOpNames[] = {"sum", "prod", "min", "max", "avg", "premul_sum"};

static_assert(sizeof(kDatatypeSizes) / sizeof(kDatatypeSizes[0]) == COLLX_NUM_DATATYPES,
              "one size per datatype");
static_assert(sizeof(kDatatypeNames) / sizeof(kDatatypeNames[0]) == COLLX_NUM_DATATYPES,
              "one name per datatype");
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == COLLX_NUM_OPS, "one name per op");

}  // namespace

size_t datatype_size(int datatype) { return datatype_valid(datatype) ? kDatatypeSizes[datatype] : 0; }

const char* datatype_name(int datatype) {
  return datatype_valid(datatype) ? kDatatypeNames[datatype] : "unknown";
}

const char* op_name(int op) { return op_valid(op) ? kOpNames[op] : "unknown"; }

}  // namespace collx
