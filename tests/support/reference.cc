#include "tests/support/reference.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lib/dtype/datatype.h"

namespace collx {
namespace testing {

namespace {

bool is_unsigned(collx_datatype_t dt) { return dt == COLLX_UINT8 || dt == COLLX_UINT32 || dt == COLLX_UINT64; }

}  // namespace

double input_value(int rank, size_t index, collx_op_t op, collx_datatype_t dt, unsigned salt) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 7919u + index * 104729u + salt * 31u) % 1000003u;
  switch (op) {
    case COLLX_PROD:
      // Every rank but one contributes +-1 (1 for unsigned); rank 0 may contribute 2 or 3,
      // so products stay tiny in every type.
      if (rank == 0) return static_cast<double>(1 + h % 3);
      if (is_unsigned(dt)) return 1.0;
      return (h % 2) ? 1.0 : -1.0;
    case COLLX_MIN:
    case COLLX_MAX:
      return is_unsigned(dt) ? static_cast<double>(h % 100) : static_cast<double>(static_cast<int>(h % 101) - 50);
    default:
      // SUM, AVG, PREMUL_SUM: |x| <= 3 so 8 ranks sum to at most 24 (x2 for premul).
      return is_unsigned(dt) ? static_cast<double>(h % 7) : static_cast<double>(static_cast<int>(h % 7) - 3);
  }
}

void store_value(void* buffer, size_t i, collx_datatype_t dt, double v) {
  switch (dt) {
    case COLLX_INT8: static_cast<int8_t*>(buffer)[i] = static_cast<int8_t>(v); break;
    case COLLX_UINT8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(v); break;
    case COLLX_INT32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(v); break;
    case COLLX_UINT32: static_cast<uint32_t*>(buffer)[i] = static_cast<uint32_t>(v); break;
    case COLLX_INT64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(v); break;
    case COLLX_UINT64: static_cast<uint64_t*>(buffer)[i] = static_cast<uint64_t>(v); break;
    case COLLX_FLOAT16: static_cast<uint16_t*>(buffer)[i] = float_to_half(static_cast<float>(v)); break;
    case COLLX_BFLOAT16: static_cast<uint16_t*>(buffer)[i] = float_to_bfloat16(static_cast<float>(v)); break;
    case COLLX_FLOAT32: static_cast<float*>(buffer)[i] = static_cast<float>(v); break;
    case COLLX_FLOAT64: static_cast<double*>(buffer)[i] = v; break;
    default: break;
  }
}

double load_value(const void* buffer, size_t i, collx_datatype_t dt) {
  switch (dt) {
    case COLLX_INT8: return static_cast<const int8_t*>(buffer)[i];
    case COLLX_UINT8: return static_cast<const uint8_t*>(buffer)[i];
    case COLLX_INT32: return static_cast<const int32_t*>(buffer)[i];
    case COLLX_UINT32: return static_cast<const uint32_t*>(buffer)[i];
    case COLLX_INT64: return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case COLLX_UINT64: return static_cast<double>(static_cast<const uint64_t*>(buffer)[i]);
    case COLLX_FLOAT16: return half_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case COLLX_BFLOAT16: return bfloat16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case COLLX_FLOAT32: return static_cast<const float*>(buffer)[i];
    case COLLX_FLOAT64: return static_cast<const double*>(buffer)[i];
    default: return NAN;
  }
}

void fill_input(void* buffer, size_t count, size_t first_index, int rank, collx_op_t op, collx_datatype_t dt,
                unsigned salt) {
  for (size_t i = 0; i < count; ++i) store_value(buffer, i, dt, input_value(rank, first_index + i, op, dt, salt));
}

double reference_reduce(collx_op_t op, collx_datatype_t dt, int size, size_t index, double premul, unsigned salt) {
  double acc = input_value(0, index, op, dt, salt);
  if (op == COLLX_PREMUL_SUM) acc *= premul;
  for (int r = 1; r < size; ++r) {
    double v = input_value(r, index, op, dt, salt);
    switch (op) {
      case COLLX_PROD: acc *= v; break;
      case COLLX_MIN: acc = v < acc ? v : acc; break;
      case COLLX_MAX: acc = v > acc ? v : acc; break;
      case COLLX_PREMUL_SUM: acc += v * premul; break;
      default: acc += v; break;
    }
  }
  if (op == COLLX_AVG) {
    acc = datatype_is_float(dt) ? acc / size : std::trunc(acc / size);
  }
  return acc;
}

bool values_match(double expected, double got, collx_datatype_t dt, collx_op_t op) {
  if (op != COLLX_AVG || !datatype_is_float(dt)) return expected == got;
  double eps = dt == COLLX_FLOAT16 ? 1.0 / 1024 : dt == COLLX_BFLOAT16 ? 1.0 / 128 : dt == COLLX_FLOAT32 ? 1e-6 : 1e-14;
  return std::fabs(expected - got) <= eps * std::fmax(1.0, std::fabs(expected));
}

std::string case_name(collx_datatype_t dt, collx_op_t op, size_t count, bool in_place) {
  return std::string(collx_datatype_name(dt)) + "/" + collx_op_name(op) + "/count=" + std::to_string(count) +
         (in_place ? "/in-place" : "/out-of-place");
}

}  // namespace testing
}  // namespace collx
