#include "bench/collx_bench/data.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "bench/collx_bench/sweep.h"  // allgatherv_shard

namespace collx_bench {

namespace {

// IEEE binary16 <-> float, round to nearest even (as collx.h specifies for COLLX_FLOAT16).
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

// Integer conversion that wraps like a two's-complement store of the low bits.
template <typename T>
T wrap_integer(double v) {
  const int64_t i = static_cast<int64_t>(v);
  return static_cast<T>(static_cast<uint64_t>(i));
}

double tolerance(collx_datatype_t t) {
  switch (t) {
    case COLLX_FLOAT16: return 2e-3;
    case COLLX_BFLOAT16: return 1.6e-2;
    case COLLX_FLOAT32: return 1e-6;
    case COLLX_FLOAT64: return 1e-12;
    default: return 0.0;
  }
}

bool element_ok(collx_datatype_t t, double got, double expected) {
  if (std::isnan(got)) return false;
  if (!datatype_is_float(t)) return got == expected;
  const double scale = std::fabs(expected) > 1.0 ? std::fabs(expected) : 1.0;
  return std::fabs(got - expected) <= tolerance(t) * scale;
}

// The reduction of every rank's input at `index`, as collx defines each op.
double reduced_value(const CallShape& s, size_t index) {
  const collx_datatype_t t = s.datatype;
  double acc = 0.0;
  for (int q = 0; q < s.nranks; ++q) {
    double v = input_value(s, q, index);
    if (s.op == COLLX_PREMUL_SUM) v = round_to_type(t, round_to_type(t, kPremulScalar) * v);
    if (q == 0) {
      acc = v;
      continue;
    }
    switch (s.op) {
      case COLLX_PROD: acc *= v; break;
      case COLLX_MIN: acc = v < acc ? v : acc; break;
      case COLLX_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;  // sum, avg, premulsum
    }
  }
  if (s.op == COLLX_AVG) {
    acc = datatype_is_float(t) ? acc / s.nranks : std::trunc(acc / s.nranks);
  }
  return round_to_type(t, acc);
}

void fill_range(const CallShape& s, void* buf, size_t begin, size_t end, int rank) {
  for (size_t i = begin; i < end; ++i) store_element(s.datatype, buf, i, input_value(s, rank, i));
}

void poison(const CallShape& s, void* buf, size_t elements) {
  for (size_t i = 0; i < elements; ++i) store_element(s.datatype, buf, i, kPoison);
}

// Reduced values repeat with the input pattern's period in the index (4, or 3n for prod:
// see input_value), so checking a large buffer costs one table lookup per element instead
// of a loop over every rank.
class ExpectedOutput {
 public:
  explicit ExpectedOutput(const CallShape& s) : s_(s) {
    if (!bench_coll_reduces(s.coll)) return;
    const size_t period = s.op == COLLX_PROD ? 3 * static_cast<size_t>(s.nranks) : 4;
    for (size_t k = 0; k < period; ++k) reduced_.push_back(reduced_value(s, k));
  }

  // Expected output element `index` of this rank (indexes the receive buffer, or for an
  // in-place reduce-scatter the rank's block).
  double at(size_t index) const {
    const size_t n = static_cast<size_t>(s_.nranks);
    const size_t c = s_.count ? s_.count : 1;
    switch (s_.coll) {
      case BenchColl::kAllreduce:
      case BenchColl::kReduce:
        return reduced_[index % reduced_.size()];
      case BenchColl::kReduceScatter:
        return reduced_[(static_cast<size_t>(s_.rank) * s_.count + index) % reduced_.size()];
      case BenchColl::kAllgather:
        return moved(static_cast<int>(index / c), index % c);
      case BenchColl::kBroadcast:
        return moved(s_.root, index);
      case BenchColl::kAlltoall:
        return moved(static_cast<int>(index / c), static_cast<size_t>(s_.rank) * c + index % c);
      case BenchColl::kGather:
        return moved(static_cast<int>(index / c), index % c);
      case BenchColl::kScatter:
        return moved(s_.root, static_cast<size_t>(s_.rank) * c + index);
      case BenchColl::kAllgatherv: {
        size_t begin = 0;  // of rank q's shard
        for (int q = 0; q < s_.nranks; ++q) {
          const size_t shard = allgatherv_shard(s_.count, q);
          if (index < begin + shard) return moved(q, index - begin);
          begin += shard;
        }
        return kPoison;
      }
      case BenchColl::kAlltoallv: {
        size_t begin = 0;  // of the block from rank q
        for (int q = 0; q < s_.nranks; ++q) {
          const size_t block = alltoallv_block(s_.count, q, s_.rank);
          if (index < begin + block) return moved(q, alltoallv_send_offset(s_.count, q, s_.rank) + index - begin);
          begin += block;
        }
        return kPoison;
      }
      case BenchColl::kReduceScatterv:
        return reduced_[(shard_offset(s_.count, s_.rank) + index) % reduced_.size()];
      case BenchColl::kGatherv: {
        for (int q = s_.nranks - 1; q >= 0; --q) {
          if (index >= shard_offset(s_.count, q)) return moved(q, index - shard_offset(s_.count, q));
        }
        return kPoison;
      }
      case BenchColl::kScatterv:
        return moved(s_.root, shard_offset(s_.count, s_.rank) + index);
      case BenchColl::kSendrecv:
        return moved(static_cast<int>((static_cast<size_t>(s_.rank) + n - 1) % n), index);
    }
    return 0.0;
  }

 private:
  double moved(int src, size_t index) const { return round_to_type(s_.datatype, input_value(s_, src, index)); }

  CallShape s_;
  std::vector<double> reduced_;
};

int64_t count_wrong_range(const CallShape& s, const void* out, size_t out_offset, size_t elements) {
  const ExpectedOutput expected(s);
  int64_t wrong = 0;
  for (size_t i = 0; i < elements; ++i) {
    if (!element_ok(s.datatype, load_element(s.datatype, out, out_offset + i), expected.at(i))) ++wrong;
  }
  return wrong;
}

size_t output_elements(const CallShape& s) {
  const size_t n = static_cast<size_t>(s.nranks);
  switch (s.coll) {
    case BenchColl::kAllgather:
    case BenchColl::kAlltoall:
      return s.count * n;
    case BenchColl::kReduce:
      return s.rank == s.root ? s.count : 0;
    case BenchColl::kGather:
      return s.rank == s.root ? s.count * n : 0;
    case BenchColl::kAllgatherv:
      return s.count * allgatherv_units(s.nranks);
    case BenchColl::kAlltoallv:
      return s.count * alltoallv_units(s.nranks, s.rank);
    case BenchColl::kGatherv:
      return s.rank == s.root ? s.count * allgatherv_units(s.nranks) : 0;
    case BenchColl::kReduceScatterv:
    case BenchColl::kScatterv:
      return allgatherv_shard(s.count, s.rank);
    default:
      return s.count;
  }
}

}  // namespace

double load_element(collx_datatype_t t, const void* buf, size_t i) {
  switch (t) {
    case COLLX_INT8: return static_cast<const int8_t*>(buf)[i];
    case COLLX_UINT8: return static_cast<const uint8_t*>(buf)[i];
    case COLLX_INT32: return static_cast<const int32_t*>(buf)[i];
    case COLLX_UINT32: return static_cast<const uint32_t*>(buf)[i];
    case COLLX_INT64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case COLLX_UINT64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case COLLX_FLOAT16: return half_to_float(static_cast<const uint16_t*>(buf)[i]);
    case COLLX_BFLOAT16: return bf16_to_float(static_cast<const uint16_t*>(buf)[i]);
    case COLLX_FLOAT32: return static_cast<const float*>(buf)[i];
    case COLLX_FLOAT64: return static_cast<const double*>(buf)[i];
    default: return 0.0;
  }
}

void store_element(collx_datatype_t t, void* buf, size_t i, double v) {
  switch (t) {
    case COLLX_INT8: static_cast<int8_t*>(buf)[i] = wrap_integer<int8_t>(v); break;
    case COLLX_UINT8: static_cast<uint8_t*>(buf)[i] = wrap_integer<uint8_t>(v); break;
    case COLLX_INT32: static_cast<int32_t*>(buf)[i] = wrap_integer<int32_t>(v); break;
    case COLLX_UINT32: static_cast<uint32_t*>(buf)[i] = wrap_integer<uint32_t>(v); break;
    case COLLX_INT64: static_cast<int64_t*>(buf)[i] = wrap_integer<int64_t>(v); break;
    case COLLX_UINT64: static_cast<uint64_t*>(buf)[i] = wrap_integer<uint64_t>(v); break;
    case COLLX_FLOAT16: static_cast<uint16_t*>(buf)[i] = float_to_half(static_cast<float>(v)); break;
    case COLLX_BFLOAT16: static_cast<uint16_t*>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
    case COLLX_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case COLLX_FLOAT64: static_cast<double*>(buf)[i] = v; break;
    default: break;
  }
}

double round_to_type(collx_datatype_t t, double v) {
  unsigned char tmp[8];
  store_element(t, tmp, 0, v);
  return load_element(t, tmp, 0);
}

double input_value(const CallShape& s, int rank, size_t index) {
  const size_t r = static_cast<size_t>(rank);
  if (!bench_coll_reduces(s.coll)) return static_cast<double>((5 * r + 3 * (index % 29)) % 29);
  if (s.op == COLLX_PROD) {
    const size_t n = static_cast<size_t>(s.nranks);
    const size_t slot = (index + r) % n;
    if (slot == 0) return 2.0;
    if (slot == 1 && index % 3 == 0) return 3.0;
    return 1.0;
  }
  const double v = static_cast<double>((3 * r + index) % 4);
  return datatype_is_signed(s.datatype) ? v - 1.0 : v;
}

void fill_out_of_place(const CallShape& s, void* send, void* recv) {
  const size_t n = static_cast<size_t>(s.nranks);
  switch (s.coll) {
    case BenchColl::kReduceScatter:
    case BenchColl::kAlltoall:
    case BenchColl::kScatter:
      fill_range(s, send, 0, s.count * n, s.rank);
      break;
    case BenchColl::kAllgatherv:
    case BenchColl::kGatherv:
      fill_range(s, send, 0, allgatherv_shard(s.count, s.rank), s.rank);
      break;
    case BenchColl::kReduceScatterv:
    case BenchColl::kScatterv:
      fill_range(s, send, 0, s.count * allgatherv_units(s.nranks), s.rank);
      break;
    case BenchColl::kAlltoallv:
      fill_range(s, send, 0, s.count * alltoallv_units(s.nranks, s.rank), s.rank);
      break;
    default:
      fill_range(s, send, 0, s.count, s.rank);
      break;
  }
  const bool recv_holds_every_block =
      s.coll == BenchColl::kAllgather || s.coll == BenchColl::kAlltoall || s.coll == BenchColl::kGather;
  size_t recv_elements = recv_holds_every_block ? s.count * n : s.count;
  if (s.coll == BenchColl::kAllgatherv || s.coll == BenchColl::kGatherv) recv_elements = s.count * allgatherv_units(s.nranks);
  if (s.coll == BenchColl::kAlltoallv) recv_elements = s.count * alltoallv_units(s.nranks, s.rank);
  if (s.coll == BenchColl::kReduceScatterv || s.coll == BenchColl::kScatterv) {
    recv_elements = allgatherv_shard(s.count, s.rank);
  }
  poison(s, recv, recv_elements);
}

void fill_in_place(const CallShape& s, void* buf) {
  const size_t n = static_cast<size_t>(s.nranks);
  switch (s.coll) {
    case BenchColl::kReduceScatter:
      fill_range(s, buf, 0, s.count * n, s.rank);
      break;
    case BenchColl::kReduceScatterv:
      fill_range(s, buf, 0, s.count * allgatherv_units(s.nranks), s.rank);
      break;
    case BenchColl::kAllgather: {
      // Only this rank's block is input; the rest is output and gets poisoned.
      poison(s, buf, s.count * n);
      const size_t base = static_cast<size_t>(s.rank) * s.count;
      for (size_t j = 0; j < s.count; ++j) store_element(s.datatype, buf, base + j, input_value(s, s.rank, j));
      break;
    }
    case BenchColl::kBroadcast:
      if (s.rank == s.root) fill_range(s, buf, 0, s.count, s.rank);
      else poison(s, buf, s.count);
      break;
    default:
      fill_range(s, buf, 0, s.count, s.rank);
      break;
  }
}

int64_t count_wrong_out_of_place(const CallShape& s, const void* recv) {
  return count_wrong_range(s, recv, 0, output_elements(s));
}

int64_t count_wrong_in_place(const CallShape& s, const void* buf) {
  // An in-place reduce-scatter leaves the rank's block at its offset in the full buffer.
  size_t offset = s.coll == BenchColl::kReduceScatter ? static_cast<size_t>(s.rank) * s.count : 0;
  if (s.coll == BenchColl::kReduceScatterv) offset = shard_offset(s.count, s.rank);
  return count_wrong_range(s, buf, offset, output_elements(s));
}

}  // namespace collx_bench
