// Layout planner: configuration, registration and finalize (offsets, buckets, padding).
#include <cstring>
#include <numeric>

#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

std::string float32_only_refusal(const char* call, const char* what, const char* field, int32_t dtype,
                                 const char* view_call) {
  if (dtype == COLLX_FLOAT32) return "";
  return std::string(call) + ": the " + what + " are " + collx_datatype_name(static_cast<collx_datatype_t>(dtype)) +
         " (config." + field + "), not float32; use " + view_call;
}

namespace {

size_t align_up(size_t v, size_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

collx_status_t create_fail(collx_status_t st, const std::string& msg) {
  thread_error() = "collx_layout_create: " + msg;
  return st;
}

collx_status_t create(const collx_layout_config_t* config, collx_layout_t* out) {
  if (!out) return create_fail(COLLX_ERR_INVALID_ARG, "layout (output) is NULL");
  *out = nullptr;
  if (!config) return create_fail(COLLX_ERR_INVALID_ARG, "config is NULL");
  if (config->size < sizeof(collx_layout_config_t))
    return create_fail(COLLX_ERR_INVALID_ARG,
                       "config->size is " + std::to_string(config->size) + ", expected " +
                           std::to_string(sizeof(collx_layout_config_t)) +
                           " (call collx_layout_config_init)");
  const collx_layout_config_t& c = *config;
  if (c.dp_size < 1)
    return create_fail(COLLX_ERR_INVALID_ARG,
                       "dp_size is " + std::to_string(c.dp_size) + ", must be >= 1");
  if (c.partition != COLLX_PART_FLAT && c.partition != COLLX_PART_PER_TENSOR)
    return create_fail(COLLX_ERR_INVALID_ARG, "unknown partition " + std::to_string(c.partition) +
                                                  " (COLLX_PART_FLAT or COLLX_PART_PER_TENSOR)");
  if (c.reverse != 0 && c.reverse != 1)
    return create_fail(COLLX_ERR_INVALID_ARG, "reverse is " + std::to_string(c.reverse) + ", must be 0 or 1");
  size_t dp = static_cast<size_t>(c.dp_size);
  size_t pad = c.bucket_pad ? c.bucket_pad : std::lcm(dp, static_cast<size_t>(128));
  if (c.partition == COLLX_PART_FLAT && pad % dp != 0)
    return create_fail(COLLX_ERR_INVALID_ARG,
                       "bucket_pad " + std::to_string(pad) + " is not a multiple of dp_size " +
                           std::to_string(dp) + " (FLAT buckets are split into dp equal ranges)");
  auto layout = new collx_layout_s();
  std::memset(&layout->config, 0, sizeof(layout->config));
  std::memcpy(&layout->config, &c, sizeof(collx_layout_config_t));
  layout->config.size = sizeof(collx_layout_config_t);
  layout->align = c.align_elems ? c.align_elems : 1;
  layout->pad = pad;
  *out = layout;
  return COLLX_OK;
}

collx_status_t finalize(collx_layout_t l) {
  const size_t dp = static_cast<size_t>(l->config.dp_size);
  const bool per_tensor = l->config.partition == COLLX_PART_PER_TENSOR;
  const size_t n = l->tensors.size();
  size_t cursor = 0;
  bool open = false;
  collx_layout_s::Bucket bucket;
  auto close = [&]() {
    bucket.numel = cursor - bucket.start;
    bucket.padded = align_up(bucket.numel, l->pad);
    cursor = bucket.start + bucket.padded;
    l->buckets.push_back(bucket);
    open = false;
  };
  for (size_t k = 0; k < n; ++k) {
    collx_layout_s::Tensor& t = l->tensors[l->config.reverse ? n - 1 - k : k];
    if (!open) {
      bucket = collx_layout_s::Bucket();
      bucket.start = cursor;
      open = true;
    }
    t.offset = align_up(cursor, l->align);
    t.padded = per_tensor ? (t.numel + dp - 1) / dp * dp : t.numel;
    t.bucket = l->buckets.size();
    cursor = t.offset + t.padded;
    size_t limit = l->config.bucket_elems;
    if (l->buckets.empty() && l->config.first_bucket_elems) limit = l->config.first_bucket_elems;
    if (limit && cursor - bucket.start >= limit) close();
  }
  if (open) close();
  l->total = cursor;
  l->finalized = true;
  return COLLX_OK;
}

}  // namespace

collx_status_t layout_fail(collx_layout_t l, collx_status_t st, const std::string& msg) {
  if (l) l->error.set(msg);
  return st;
}

}  // namespace parallel
}  // namespace collx

using collx::parallel::guarded;
using collx::parallel::layout_fail;

extern "C" {

COLLX_API collx_status_t collx_layout_config_init(collx_layout_config_t* config, size_t size) {
  if (!config || size < sizeof(size_t))
    return collx::parallel::refuse_arg(nullptr, "collx_layout_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  collx_layout_config_t c;
  std::memset(&c, 0, sizeof c);
  c.dp_size = 0;
  c.reverse = 1;
  c.partition = COLLX_PART_FLAT;
  c.align_elems = 64;
  c.bucket_elems = 0;
  c.first_bucket_elems = 0;
  c.bucket_pad = 0;
  std::memcpy(config, &c, size < sizeof(c) ? size : sizeof(c));
  config->size = size;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_layout_create(const collx_layout_config_t* config,
                                             collx_layout_t* layout) {
  return guarded([&] { return collx::parallel::create(config, layout); },
                 [](const std::string& m) {
                   collx::parallel::thread_error() = "collx_layout_create: " + m;
                 });
}

COLLX_API collx_status_t collx_layout_destroy(collx_layout_t layout) {
  delete layout;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_layout_add(collx_layout_t layout, uint64_t tensor_id, size_t numel,
                                          collx_datatype_t datatype, uint32_t flags) {
  if (!layout) return collx::parallel::refuse_arg(layout, "collx_layout_add", "layout is NULL");
  // The caller may pass any int (FFI, casts): read the enum's bytes as an int, because
  // loading an out-of-range value as collx_datatype_t is undefined behaviour.
  static_assert(sizeof(collx_datatype_t) == sizeof(int), "C enums are int-sized here");
  int datatype_value;
  std::memcpy(&datatype_value, &datatype, sizeof datatype_value);
  return guarded(
      [&]() -> collx_status_t {
        const std::string id = std::to_string(tensor_id);
        if (layout->finalized)
          return layout_fail(layout, COLLX_ERR_INVALID_USAGE,
                             "collx_layout_add: tensor " + id +
                                 " added after collx_layout_finalize (create a new layout)");
        if (datatype_value < 0 || datatype_value >= COLLX_NUM_DATATYPES)
          return layout_fail(layout, COLLX_ERR_INVALID_ARG,
                             "collx_layout_add: tensor " + id + " has unknown datatype " +
                                 std::to_string(datatype_value));
        if (numel > (SIZE_MAX >> 4))
          return layout_fail(layout, COLLX_ERR_INVALID_ARG,
                             "collx_layout_add: tensor " + id + " numel " + std::to_string(numel) +
                                 " is too large");
        auto it = layout->index.find(tensor_id);
        if (it != layout->index.end())
          return layout_fail(layout, COLLX_ERR_INVALID_ARG,
                             "collx_layout_add: tensor " + id +
                                 " is already registered (registration index " +
                                 std::to_string(it->second) + ")");
        collx_layout_s::Tensor t;
        t.id = tensor_id;
        t.numel = numel;
        t.dtype = static_cast<int32_t>(datatype_value);
        t.flags = flags;
        layout->tensors.push_back(t);
        layout->index.emplace(tensor_id, layout->tensors.size() - 1);
        return COLLX_OK;
      },
      [&](const std::string& m) { layout_fail(layout, COLLX_OK, "collx_layout_add: " + m); });
}

COLLX_API collx_status_t collx_layout_finalize(collx_layout_t layout) {
  if (!layout) return collx::parallel::refuse_arg(nullptr, "collx_layout_finalize", "layout is NULL");
  if (layout->finalized)
    return layout_fail(layout, COLLX_ERR_INVALID_USAGE,
                       "collx_layout_finalize: the layout is already finalized");
  return guarded([&] { return collx::parallel::finalize(layout); },
                 [&](const std::string& m) {
                   layout->buckets.clear();
                   layout_fail(layout, COLLX_OK, "collx_layout_finalize: " + m);
                 });
}

COLLX_API const char* collx_layout_last_error(collx_layout_t layout) {
  if (!layout) return collx::parallel::thread_error().c_str();
  return layout->error.get();
}

}  // extern "C"
