// Datatype sizes and names, op names, and validity checks, including out-of-range values.
#include <gtest/gtest.h>

#include <string>

#include "lib/dtype/datatype.h"

namespace collx {
namespace {

TEST(DatatypeSize, IsTheElementWidthInBytes) {
  EXPECT_EQ(datatype_size(COLLX_INT8), 1u);
  EXPECT_EQ(datatype_size(COLLX_UINT8), 1u);
  EXPECT_EQ(datatype_size(COLLX_INT32), 4u);
  EXPECT_EQ(datatype_size(COLLX_UINT32), 4u);
  EXPECT_EQ(datatype_size(COLLX_INT64), 8u);
  EXPECT_EQ(datatype_size(COLLX_UINT64), 8u);
  EXPECT_EQ(datatype_size(COLLX_FLOAT16), 2u);
  EXPECT_EQ(datatype_size(COLLX_BFLOAT16), 2u);
  EXPECT_EQ(datatype_size(COLLX_FLOAT32), 4u);
  EXPECT_EQ(datatype_size(COLLX_FLOAT64), 8u);
}

TEST(DatatypeSize, IsZeroForInvalidDatatypes) {
  EXPECT_EQ(datatype_size(-1), 0u);
  EXPECT_EQ(datatype_size(COLLX_NUM_DATATYPES), 0u);
  EXPECT_EQ(datatype_size(1000), 0u);
}

TEST(DatatypeName, NamesEveryDatatype) {
  EXPECT_STREQ(datatype_name(COLLX_INT8), "int8");
  EXPECT_STREQ(datatype_name(COLLX_UINT8), "uint8");
  EXPECT_STREQ(datatype_name(COLLX_INT32), "int32");
  EXPECT_STREQ(datatype_name(COLLX_UINT32), "uint32");
  EXPECT_STREQ(datatype_name(COLLX_INT64), "int64");
  EXPECT_STREQ(datatype_name(COLLX_UINT64), "uint64");
  EXPECT_STREQ(datatype_name(COLLX_FLOAT16), "float16");
  EXPECT_STREQ(datatype_name(COLLX_BFLOAT16), "bfloat16");
  EXPECT_STREQ(datatype_name(COLLX_FLOAT32), "float32");
  EXPECT_STREQ(datatype_name(COLLX_FLOAT64), "float64");
  EXPECT_STREQ(datatype_name(-1), "unknown");
  EXPECT_STREQ(datatype_name(COLLX_NUM_DATATYPES), "unknown");
}

TEST(OpName, NamesEveryOp) {
  EXPECT_STREQ(op_name(COLLX_SUM), "sum");
  EXPECT_STREQ(op_name(COLLX_PROD), "prod");
  EXPECT_STREQ(op_name(COLLX_MIN), "min");
  EXPECT_STREQ(op_name(COLLX_MAX), "max");
  EXPECT_STREQ(op_name(COLLX_AVG), "avg");
  EXPECT_STREQ(op_name(COLLX_PREMUL_SUM), "premul_sum");
  EXPECT_STREQ(op_name(-1), "unknown");
  EXPECT_STREQ(op_name(COLLX_NUM_OPS), "unknown");
}

TEST(DatatypeValidity, AcceptsExactlyTheEnumRange) {
  EXPECT_FALSE(datatype_valid(-1));
  EXPECT_TRUE(datatype_valid(0));
  EXPECT_TRUE(datatype_valid(COLLX_NUM_DATATYPES - 1));
  EXPECT_FALSE(datatype_valid(COLLX_NUM_DATATYPES));
  EXPECT_FALSE(op_valid(-1));
  EXPECT_TRUE(op_valid(COLLX_PREMUL_SUM));
  EXPECT_FALSE(op_valid(COLLX_NUM_OPS));
  for (int dt = 0; dt < COLLX_NUM_DATATYPES; ++dt) {
    const std::string name = datatype_name(dt);
    EXPECT_EQ(datatype_is_float(static_cast<collx_datatype_t>(dt)), name.find("float") != std::string::npos)
        << name;
  }
}

}  // namespace
}  // namespace collx
