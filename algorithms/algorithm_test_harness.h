// Test-only helpers shared by algorithms/*_test.cc: run an algorithm on every rank of an
// InprocFabric (ranks as threads), and typed access to buffers so tests can fill inputs and
// compare against references computed in double. Not part of the library.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "lib/dtype/datatype.h"
#include "tests/support/inproc_transport.h"

namespace collx {
namespace algo {
namespace testing_support {

using AlgorithmFn = Status (*)(const Context&, const CollArgs&);

struct AlgorithmInfo {
  const char* name;
  AlgorithmFn fn;
  collx_coll_t kind;
  collx_algorithm_t algorithm;
};

inline const std::vector<AlgorithmInfo>& all_algorithms() {
  static const std::vector<AlgorithmInfo> list = {
      {"allreduce_ring", allreduce_ring, COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING},
      {"allreduce_recursive_doubling", allreduce_recursive_doubling, COLLX_COLL_ALLREDUCE,
       COLLX_ALGO_RECURSIVE_DOUBLING},
      {"allreduce_rabenseifner", allreduce_rabenseifner, COLLX_COLL_ALLREDUCE, COLLX_ALGO_RABENSEIFNER},
      {"allreduce_double_tree", allreduce_double_tree, COLLX_COLL_ALLREDUCE, COLLX_ALGO_DOUBLE_TREE},
      {"reduce_scatter_ring", reduce_scatter_ring, COLLX_COLL_REDUCE_SCATTER, COLLX_ALGO_RING},
      {"allgather_ring", allgather_ring, COLLX_COLL_ALLGATHER, COLLX_ALGO_RING},
      {"broadcast_binomial", broadcast_binomial, COLLX_COLL_BROADCAST, COLLX_ALGO_BINOMIAL},
      {"reduce_binomial", reduce_binomial, COLLX_COLL_REDUCE, COLLX_ALGO_BINOMIAL},
      {"alltoall_pairwise", alltoall_pairwise, COLLX_COLL_ALLTOALL, COLLX_ALGO_PAIRWISE},
      {"barrier_dissemination", barrier_dissemination, COLLX_COLL_BARRIER, COLLX_ALGO_DISSEMINATION},
  };
  return list;
}

inline transport::OpDesc make_desc(const AlgorithmInfo& algo, size_t count, collx_datatype_t datatype,
                                   collx_op_t op, int root, uint64_t seq) {
  transport::OpDesc desc;
  desc.kind = static_cast<uint8_t>(algo.kind);
  desc.datatype = static_cast<uint8_t>(datatype);
  desc.op = static_cast<uint8_t>(op);
  desc.algorithm = static_cast<uint8_t>(algo.algorithm);
  desc.root = root;
  desc.count = count;
  desc.seq = seq;
  return desc;
}

// Per-rank state that outlives one collective: the scratch pool of "the communicator".
class RankPools {
 public:
  explicit RankPools(int size) {
    for (int r = 0; r < size; ++r) pools_.push_back(std::make_unique<ScratchPool>());
  }
  ScratchPool* pool(int rank) { return pools_[static_cast<size_t>(rank)].get(); }

 private:
  std::vector<std::unique_ptr<ScratchPool>> pools_;
};

inline Context make_context(testing::InprocFabric& fabric, RankPools& pools, int rank, size_t chunk_bytes) {
  Context ctx;
  ctx.transport = fabric.endpoint(rank);
  ctx.rank = rank;
  ctx.size = fabric.size();
  ctx.chunk_bytes = chunk_bytes;
  ctx.scratch = pools.pool(rank);
  return ctx;
}

// --- Typed element access -------------------------------------------------------------

namespace detail {
template <typename T>
void store_as(void* buf, const double* values, size_t n) {
  T* out = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(values[i]);
}
template <typename T>
void load_as(const void* buf, double* values, size_t n) {
  const T* in = static_cast<const T*>(buf);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<double>(in[i]);
}
}  // namespace detail

// buf[i] = values[i] for i < n; values must be exactly representable (tests use small
// integers). buf needs the element's alignment.
inline void store_elements(void* buf, collx_datatype_t dt, const double* values, size_t n) {
  switch (dt) {
    case COLLX_INT8: detail::store_as<int8_t>(buf, values, n); break;
    case COLLX_UINT8: detail::store_as<uint8_t>(buf, values, n); break;
    case COLLX_INT32: detail::store_as<int32_t>(buf, values, n); break;
    case COLLX_UINT32: detail::store_as<uint32_t>(buf, values, n); break;
    case COLLX_INT64: detail::store_as<int64_t>(buf, values, n); break;
    case COLLX_UINT64: detail::store_as<uint64_t>(buf, values, n); break;
    case COLLX_FLOAT32: detail::store_as<float>(buf, values, n); break;
    case COLLX_FLOAT64: detail::store_as<double>(buf, values, n); break;
    case COLLX_FLOAT16:
    case COLLX_BFLOAT16: {
      uint16_t* out = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(values[i]);
        out[i] = dt == COLLX_FLOAT16 ? float_to_half(f) : float_to_bfloat16(f);
      }
      break;
    }
    default: break;
  }
}

inline void load_elements(const void* buf, collx_datatype_t dt, double* values, size_t n) {
  switch (dt) {
    case COLLX_INT8: detail::load_as<int8_t>(buf, values, n); break;
    case COLLX_UINT8: detail::load_as<uint8_t>(buf, values, n); break;
    case COLLX_INT32: detail::load_as<int32_t>(buf, values, n); break;
    case COLLX_UINT32: detail::load_as<uint32_t>(buf, values, n); break;
    case COLLX_INT64: detail::load_as<int64_t>(buf, values, n); break;
    case COLLX_UINT64: detail::load_as<uint64_t>(buf, values, n); break;
    case COLLX_FLOAT32: detail::load_as<float>(buf, values, n); break;
    case COLLX_FLOAT64: detail::load_as<double>(buf, values, n); break;
    case COLLX_FLOAT16:
    case COLLX_BFLOAT16: {
      const uint16_t* in = static_cast<const uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) values[i] = dt == COLLX_FLOAT16 ? half_to_float(in[i]) : bfloat16_to_float(in[i]);
      break;
    }
    default: break;
  }
}

inline bool is_unsigned(collx_datatype_t dt) {
  return dt == COLLX_UINT8 || dt == COLLX_UINT32 || dt == COLLX_UINT64;
}

inline uint64_t mix_bits(uint64_t x) {
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

// An input value chosen so that the reduction over up to 8 ranks is exact in every
// datatype (float16 and bfloat16 included) and never overflows int8/uint8:
// SUM |x| <= 4; PROD factors +-1 with a 2 on at most two ranks; MIN/MAX |x| <= 100.
inline double input_value(collx_datatype_t dt, collx_op_t op, int rank, int size, size_t i, uint64_t seed) {
  const uint64_t h = mix_bits((seed << 40) + (static_cast<uint64_t>(rank) << 32) + i) >> 8;
  const bool sign_ok = !is_unsigned(dt);
  switch (op) {
    case COLLX_SUM:
      return sign_ok ? static_cast<double>(h % 9) - 4 : static_cast<double>(h % 5);
    case COLLX_PROD: {
      const size_t n = static_cast<size_t>(size);
      const bool two = static_cast<size_t>(rank) == i % n || static_cast<size_t>(rank) == (i / 3 + 1) % n;
      const double magnitude = two ? 2 : 1;
      return sign_ok && (h & 1) ? -magnitude : magnitude;
    }
    default:
      return sign_ok ? static_cast<double>(h % 201) - 100 : static_cast<double>(h % 201);
  }
}

inline double apply_op(collx_op_t op, double a, double b) {
  switch (op) {
    case COLLX_SUM: return a + b;
    case COLLX_PROD: return a * b;
    case COLLX_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
  }
}

// A buffer with guard bytes on both sides, to catch writes outside the collective's range.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kPattern = 0xA5;

  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard, kPattern) {}
  char* data() { return reinterpret_cast<char*>(storage_.data() + kGuard); }
  size_t bytes() const { return bytes_; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (storage_[i] != kPattern || storage_[kGuard + bytes_ + i] != kPattern) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

}  // namespace testing_support
}  // namespace algo
}  // namespace collx
