// Layout planner: read-only queries of a finalized layout.
#include <algorithm>

#include "parallel/parallel_internal.h"

using collx::parallel::guarded;
using collx::parallel::layout_fail;

namespace {

// Common checks of the queries: a layout, finalized. Returns COLLX_OK when usable.
collx_status_t check(collx_layout_t l, const char* fn) {
  if (!l) return collx::parallel::refuse_arg(nullptr, fn, "layout is NULL");
  if (!l->finalized)
    return layout_fail(l, COLLX_ERR_INVALID_USAGE,
                       std::string(fn) + ": the layout is not finalized (call collx_layout_finalize)");
  return COLLX_OK;
}

collx_status_t find(collx_layout_t l, uint64_t id, const char* fn, const collx_layout_s::Tensor** t) {
  auto it = l->index.find(id);
  if (it == l->index.end())
    return layout_fail(l, COLLX_ERR_INVALID_ARG,
                       std::string(fn) + ": unknown tensor id " + std::to_string(id));
  *t = &l->tensors[it->second];
  return COLLX_OK;
}

collx_status_t check_rank(collx_layout_t l, int32_t rank, const char* fn) {
  if (rank < 0 || rank >= l->config.dp_size)
    return layout_fail(l, COLLX_ERR_INVALID_ARG,
                       std::string(fn) + ": rank " + std::to_string(rank) + " is out of range [0, " +
                           std::to_string(l->config.dp_size) + ")");
  return COLLX_OK;
}

template <typename Fn>
collx_status_t query(collx_layout_t l, const char* fn, Fn&& body) {
  collx_status_t st = check(l, fn);
  if (st != COLLX_OK) return st;
  return guarded(body, [&](const std::string& m) { layout_fail(l, COLLX_OK, std::string(fn) + ": " + m); });
}

}  // namespace

extern "C" {

COLLX_API collx_status_t collx_layout_tensor(collx_layout_t layout, uint64_t tensor_id,
                                             size_t* offset, size_t* numel) {
  const char* fn = "collx_layout_tensor";
  return query(layout, fn, [&]() -> collx_status_t {
    const collx_layout_s::Tensor* t = nullptr;
    collx_status_t st = find(layout, tensor_id, fn, &t);
    if (st != COLLX_OK) return st;
    if (offset) *offset = t->offset;
    if (numel) *numel = t->numel;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_tensor_bucket(collx_layout_t layout, uint64_t tensor_id,
                                                    size_t* bucket, size_t* padded_numel) {
  const char* fn = "collx_layout_tensor_bucket";
  return query(layout, fn, [&]() -> collx_status_t {
    const collx_layout_s::Tensor* t = nullptr;
    collx_status_t st = find(layout, tensor_id, fn, &t);
    if (st != COLLX_OK) return st;
    if (bucket) *bucket = t->bucket;
    if (padded_numel) *padded_numel = t->padded;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_total(collx_layout_t layout, size_t* total_elems) {
  return query(layout, "collx_layout_total", [&]() -> collx_status_t {
    if (total_elems) *total_elems = layout->total;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_num_buckets(collx_layout_t layout, size_t* num_buckets) {
  return query(layout, "collx_layout_num_buckets", [&]() -> collx_status_t {
    if (num_buckets) *num_buckets = layout->buckets.size();
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_bucket(collx_layout_t layout, size_t bucket, size_t* start,
                                             size_t* padded_numel, size_t* numel) {
  const char* fn = "collx_layout_bucket";
  return query(layout, fn, [&]() -> collx_status_t {
    if (bucket >= layout->buckets.size())
      return layout_fail(layout, COLLX_ERR_INVALID_ARG,
                         std::string(fn) + ": bucket " + std::to_string(bucket) +
                             " is out of range (the layout has " +
                             std::to_string(layout->buckets.size()) + " buckets)");
    const collx_layout_s::Bucket& b = layout->buckets[bucket];
    if (start) *start = b.start;
    if (padded_numel) *padded_numel = b.padded;
    if (numel) *numel = b.numel;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_owned(collx_layout_t layout, size_t bucket, int32_t rank,
                                            size_t* start, size_t* count) {
  const char* fn = "collx_layout_owned";
  return query(layout, fn, [&]() -> collx_status_t {
    if (layout->config.partition != COLLX_PART_FLAT)
      return layout_fail(layout, COLLX_ERR_INVALID_USAGE,
                         std::string(fn) +
                             ": PER_TENSOR layouts have no contiguous owner range per bucket "
                             "(use collx_layout_tensor_shard)");
    if (bucket >= layout->buckets.size())
      return layout_fail(layout, COLLX_ERR_INVALID_ARG,
                         std::string(fn) + ": bucket " + std::to_string(bucket) +
                             " is out of range (the layout has " +
                             std::to_string(layout->buckets.size()) + " buckets)");
    collx_status_t st = check_rank(layout, rank, fn);
    if (st != COLLX_OK) return st;
    const collx_layout_s::Bucket& b = layout->buckets[bucket];
    size_t shard = b.padded / static_cast<size_t>(layout->config.dp_size);
    if (start) *start = b.start + static_cast<size_t>(rank) * shard;
    if (count) *count = shard;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_layout_tensor_shard(collx_layout_t layout, uint64_t tensor_id,
                                                   int32_t rank, size_t* tensor_offset,
                                                   size_t* buffer_offset, size_t* count) {
  const char* fn = "collx_layout_tensor_shard";
  return query(layout, fn, [&]() -> collx_status_t {
    const collx_layout_s::Tensor* t = nullptr;
    collx_status_t st = find(layout, tensor_id, fn, &t);
    if (st == COLLX_OK) st = check_rank(layout, rank, fn);
    if (st != COLLX_OK) return st;
    const size_t dp = static_cast<size_t>(layout->config.dp_size);
    const size_t r = static_cast<size_t>(rank);
    size_t lo, hi;  // owned range in buffer coordinates
    if (layout->config.partition == COLLX_PART_FLAT) {
      const collx_layout_s::Bucket& b = layout->buckets[t->bucket];
      size_t shard = b.padded / dp;
      lo = b.start + r * shard;
      hi = lo + shard;
    } else {
      size_t chunk = t->padded / dp;
      lo = t->offset + r * chunk;
      hi = lo + chunk;
    }
    size_t begin = std::max(lo, t->offset);
    size_t end = std::min(hi, t->offset + t->numel);
    if (end < begin) end = begin;
    // An empty intersection is reported at the nearest point of the tensor.
    if (begin > t->offset + t->numel) begin = end = t->offset + t->numel;
    if (tensor_offset) *tensor_offset = begin - t->offset;
    if (buffer_offset) *buffer_offset = begin;
    if (count) *count = end - begin;
    return COLLX_OK;
  });
}

}  // extern "C"
