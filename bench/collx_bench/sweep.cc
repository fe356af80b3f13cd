#include "bench/collx_bench/sweep.h"

#include <algorithm>

namespace collx_bench {

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                 uint64_t step_factor, std::string* error) {
  std::vector<uint64_t> sizes;
  if (min_bytes > max_bytes) {
    *error = "minbytes (" + std::to_string(min_bytes) + ") is larger than maxbytes (" +
             std::to_string(max_bytes) + ")";
    return sizes;
  }
  const bool by_factor = step_factor > 1;
  if (!by_factor && step_bytes == 0 && min_bytes != max_bytes) {
    *error = "stepbytes is 0 and stepfactor is 1: the sweep would not advance";
    return sizes;
  }
  if (by_factor && min_bytes == 0 && max_bytes > 0) {
    *error = "minbytes 0 with a stepfactor would never grow; start at 1 or more";
    return sizes;
  }
  uint64_t size = min_bytes;
  while (size <= max_bytes) {
    sizes.push_back(size);
    // Stop before the next step could wrap around 64 bits (or not advance at all).
    if (by_factor) {
      if (size > max_bytes / step_factor) break;
      size *= step_factor;
    } else {
      if (step_bytes == 0 || size > max_bytes - step_bytes) break;
      size += step_bytes;
    }
  }
  return sizes;
}

RowCounts row_counts(BenchColl coll, uint64_t size_bytes, size_t elt_bytes, int nranks) {
  RowCounts c;
  if (elt_bytes == 0 || nranks <= 0) return c;
  const size_t count = static_cast<size_t>(size_bytes / elt_bytes);
  const size_t n = static_cast<size_t>(nranks);
  // nccl-tests: (count/nranks) & -(16/eltSize); every element size divides 16.
  const size_t align = 16 / elt_bytes;
  const size_t per_rank = (count / n) / align * align;
  switch (coll) {
    case BenchColl::kReduceScatter:
      c.count = per_rank;
      c.send_count = per_rank * n;
      c.recv_count = per_rank;
      break;
    case BenchColl::kAllgather:
      c.count = per_rank;
      c.send_count = per_rank;
      c.recv_count = per_rank * n;
      break;
    case BenchColl::kAlltoall:
      c.count = per_rank;
      c.send_count = per_rank * n;
      c.recv_count = per_rank * n;
      break;
    case BenchColl::kGather:  // the root's recvbuf holds every block
      c.count = per_rank;
      c.send_count = per_rank;
      c.recv_count = per_rank * n;
      break;
    case BenchColl::kAllgatherv: {
      const size_t unit = (count / allgatherv_units(nranks)) / align * align;
      c.count = unit;
      c.send_count = allgatherv_shard(unit, nranks > 2 ? 2 : nranks - 1);  // the largest shard
      c.recv_count = unit * allgatherv_units(nranks);
      break;
    }
    case BenchColl::kReduceScatterv:
    case BenchColl::kGatherv:
    case BenchColl::kScatterv: {
      const size_t unit = (count / allgatherv_units(nranks)) / align * align;
      const size_t whole = unit * allgatherv_units(nranks), largest = allgatherv_shard(unit, nranks > 2 ? 2 : nranks - 1);
      c.count = unit;
      c.send_count = coll == BenchColl::kGatherv ? largest : whole;
      c.recv_count = coll == BenchColl::kGatherv ? whole : largest;
      break;
    }
    case BenchColl::kAlltoallv: {
      const size_t unit = (count / alltoallv_max_units(nranks)) / align * align;
      c.count = unit;
      c.send_count = c.recv_count = unit * alltoallv_max_units(nranks);
      break;
    }
    case BenchColl::kScatter:  // the root's sendbuf holds every block
      c.count = per_rank;
      c.send_count = per_rank * n;
      c.recv_count = per_rank;
      break;
    default:
      c.count = count;
      c.send_count = count;
      c.recv_count = count;
      break;
  }
  const size_t elems = c.send_count > c.recv_count ? c.send_count : c.recv_count;
  c.bytes = static_cast<uint64_t>(elems) * elt_bytes;
  return c;
}

size_t allgatherv_shard(size_t unit, int rank) { return unit * (1 + static_cast<size_t>(rank % 3)); }

size_t allgatherv_units(int nranks) { return shard_offset(1, nranks); }

size_t shard_offset(size_t unit, int rank) {
  size_t elements = 0;
  for (int q = 0; q < rank; ++q) elements += allgatherv_shard(unit, q);
  return elements;
}

size_t alltoallv_block(size_t unit, int src, int dst) {
  return unit * (1 + static_cast<size_t>((src + dst) % 3));
}

size_t alltoallv_send_offset(size_t unit, int src, int dst) {
  size_t elements = 0;
  for (int d = 0; d < dst; ++d) elements += alltoallv_block(unit, src, d);
  return elements;
}

size_t alltoallv_units(int nranks, int rank) { return alltoallv_send_offset(1, rank, nranks); }

size_t alltoallv_max_units(int nranks) {
  size_t most = 0;
  for (int r = 0; r < nranks; ++r) most = std::max(most, alltoallv_units(nranks, r));
  return most;
}

double busbw_factor(BenchColl coll, int nranks) {
  if (nranks <= 0) return 0.0;
  const double n = nranks;
  switch (coll) {
    case BenchColl::kAllreduce:
      return 2.0 * (n - 1.0) / n;
    case BenchColl::kReduceScatter:
    case BenchColl::kAllgather:
    case BenchColl::kAlltoall:
    case BenchColl::kGather:
    case BenchColl::kScatter:
    case BenchColl::kAllgatherv:
    case BenchColl::kAlltoallv:
    case BenchColl::kReduceScatterv:
    case BenchColl::kGatherv:
    case BenchColl::kScatterv:
      return (n - 1.0) / n;
    default:
      return 1.0;
  }
}

double algbw_gbs(uint64_t bytes, double time_us) {
  if (!(time_us > 0.0)) return 0.0;
  return static_cast<double>(bytes) / 1.0e9 / (time_us * 1.0e-6);
}

}  // namespace collx_bench
