// Tensor- and sequence-parallel data movement: Megatron's f/g all-reduce, last-dimension
// split and gather, dim-0 split, gather and reduce-scatter, and the SP norm-gradient
// all-reduce. On device buffers (parallel_device.h) the same steps are queued on the
// thread's current parallel stream: copies become device copies, temporaries the thread's
// device workspace.
#include <algorithm>
#include <vector>

#include "parallel/device_buffers.h"
#include "parallel/dp_internal.h"
#include "parallel/free_calls.h"

namespace collx {
namespace parallel {
namespace {

// dims must split evenly over the TP ranks: `what` of `fn` is n.
collx_status_t need_divisible(size_t n, size_t by, const char* fn, const char* what) {
  if (n % by == 0) return COLLX_OK;
  return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": " + what + " " + std::to_string(n) +
                                              " is not divisible by the TP size " + std::to_string(by));
}

collx_status_t last_split(const void* in, void* out, size_t rows, size_t cols, collx_datatype_t dt,
                          collx_comm_t comm) {
  GroupShape g;
  collx_status_t st = group_shape(comm, "collx_tp_split_last", &g);
  if (st == COLLX_OK) st = need_divisible(cols, g.size, "collx_tp_split_last", "cols");
  if (st != COLLX_OK) return st;
  const size_t es = collx_datatype_size(dt), block = cols / g.size * es;
  if (rows == 0 || block == 0) return COLLX_OK;
  if (!in || !out) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_split_last: in or out is NULL");
  bool device = false;
  st = buffers_on_device("collx_tp_split_last", {in, out}, &device);
  if (st != COLLX_OK) return st;
  if (device)
    return dev_copy2d("collx_tp_split_last", out, block, static_cast<const char*>(in) + g.rank * block, cols * es,
                      block, rows);
  for (size_t i = 0; i < rows; ++i)
    std::memcpy(static_cast<char*>(out) + i * block,
                static_cast<const char*>(in) + i * cols * es + g.rank * block, block);
  return COLLX_OK;
}

// The device form of last_gather: one strided copy per rank's block, from the thread's
// device workspace (no allocation, no host wait).
collx_status_t last_gather_device(const void* in, void* out, size_t rows, size_t block, size_t n, collx_datatype_t dt,
                                  collx_comm_t comm, const GroupShape& g) {
  const char* fn = "collx_tp_gather_last";
  Workspace ws;
  char* tmp = nullptr;
  collx_status_t st = ws.acquire(fn, out, rows * block * g.size, &tmp);
  if (st != COLLX_OK) return st;
  const collx_opts_t o = stream_opts();
  st = collx_allgather(in, tmp, n, dt, comm, &o);
  if (st != COLLX_OK) st = comm_fail(comm, st, fn);
  for (size_t r = 0; r < g.size && st == COLLX_OK; ++r)
    st = dev_copy2d(fn, static_cast<char*>(out) + r * block, g.size * block, tmp + r * rows * block, block, block,
                    rows);
  const collx_status_t d = ws.done(fn);
  return st != COLLX_OK ? st : d;
}

// All-gather into [t][rows][cols_local], then interleave the blocks into rows.
collx_status_t last_gather(const void* in, void* out, size_t rows, size_t cols_local, collx_datatype_t dt,
                           collx_comm_t comm) {
  GroupShape g;
  collx_status_t st = group_shape(comm, "collx_tp_gather_last", &g);
  if (st != COLLX_OK) return st;
  const size_t es = collx_datatype_size(dt), block = cols_local * es, n = rows * cols_local;
  if (!n) return COLLX_OK;
  if (!in || !out) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_gather_last: in or out is NULL");
  bool device = false;
  st = buffers_on_device("collx_tp_gather_last", {in, out}, &device);
  if (st != COLLX_OK) return st;
  if (device) return last_gather_device(in, out, rows, block, n, dt, comm, g);
  std::vector<char> tmp(n * es * g.size);
  st = collx_allgather(in, tmp.data(), n, dt, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(comm, st, "collx_tp_gather_last");
  for (size_t r = 0; r < g.size; ++r)
    for (size_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<char*>(out) + (i * g.size + r) * block, tmp.data() + (r * rows + i) * block, block);
  return COLLX_OK;
}

collx_status_t first_split(const void* in, void* out, size_t rows, size_t cols, collx_datatype_t dt,
                           collx_comm_t comm) {
  GroupShape g;
  collx_status_t st = group_shape(comm, "collx_sp_split_first", &g);
  if (st == COLLX_OK) st = need_divisible(rows, g.size, "collx_sp_split_first", "rows");
  if (st != COLLX_OK) return st;
  const size_t bytes = rows / g.size * cols * collx_datatype_size(dt);
  if (!bytes) return COLLX_OK;
  if (!in || !out) return free_fail(COLLX_ERR_INVALID_ARG, "collx_sp_split_first: in or out is NULL");
  bool device = false;
  st = buffers_on_device("collx_sp_split_first", {in, out}, &device);
  if (st != COLLX_OK) return st;
  if (device)
    return dev_copy("collx_sp_split_first", out, static_cast<const char*>(in) + g.rank * bytes, bytes,
                    Dir::kDeviceToDevice);
  std::memcpy(out, static_cast<const char*>(in) + g.rank * bytes, bytes);
  return COLLX_OK;
}

collx_status_t first_reduce_scatter(const void* in, void* out, size_t rows, size_t cols, collx_datatype_t dt,
                                    collx_comm_t comm) {
  GroupShape g;
  collx_status_t st = group_shape(comm, "collx_sp_reduce_scatter_first", &g);
  if (st == COLLX_OK) st = need_divisible(rows, g.size, "collx_sp_reduce_scatter_first", "rows");
  if (st != COLLX_OK) return st;
  const collx_opts_t o = stream_opts();
  st = collx_reduce_scatter(in, out, rows / g.size * cols, dt, COLLX_SUM, comm, &o);
  return st == COLLX_OK ? st : comm_fail(comm, st, "collx_sp_reduce_scatter_first");
}

// finalize on a device buffer: packed in the thread's device workspace by device copies.
collx_status_t finalize_device(collx_layout_t l, float* buffer, collx_comm_t comm) {
  const char* fn = "collx_tp_finalize_grads";
  size_t total = 0;
  for (const auto& t : l->tensors)
    if (t.flags & COLLX_TENSOR_SP_NORM) total += t.numel;
  if (!total) return COLLX_OK;
  Workspace ws;
  char* packed = nullptr;
  collx_status_t st = ws.acquire(fn, buffer, total * sizeof(float), &packed);
  auto each_tensor = [&](bool pack) {
    float* p = reinterpret_cast<float*>(packed);
    for (const auto& t : l->tensors) {
      if (!(t.flags & COLLX_TENSOR_SP_NORM) || st != COLLX_OK) continue;
      st = pack ? dev_copy(fn, p, buffer + t.offset, t.numel * sizeof(float), Dir::kDeviceToDevice)
                : dev_copy(fn, buffer + t.offset, p, t.numel * sizeof(float), Dir::kDeviceToDevice);
      p += t.numel;
    }
  };
  if (st != COLLX_OK) return st;
  each_tensor(true);
  const collx_opts_t o = stream_opts();
  if (st == COLLX_OK) {
    st = collx_allreduce(packed, packed, total, COLLX_FLOAT32, COLLX_SUM, comm, &o);
    if (st != COLLX_OK) st = comm_fail(comm, st, fn);
  }
  each_tensor(false);
  const collx_status_t d = ws.done(fn);
  return st != COLLX_OK ? st : d;
}

// Packs the SP_NORM gradients, one SUM all-reduce over TP, unpacks.
collx_status_t finalize(collx_layout_t l, float* buffer, collx_comm_t comm) {
  if (!l->finalized) return free_fail(COLLX_ERR_INVALID_USAGE, "collx_tp_finalize_grads: the layout is not finalized");
  if (is_device(buffer)) return finalize_device(l, buffer, comm);
  std::vector<float> packed;
  for (const auto& t : l->tensors)
    if (t.flags & COLLX_TENSOR_SP_NORM) packed.insert(packed.end(), buffer + t.offset, buffer + t.offset + t.numel);
  if (packed.empty()) return COLLX_OK;
  collx_status_t st = collx_allreduce(packed.data(), packed.data(), packed.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(comm, st, "collx_tp_finalize_grads");
  size_t k = 0;
  for (const auto& t : l->tensors)
    if (t.flags & COLLX_TENSOR_SP_NORM) {
      std::copy_n(packed.data() + k, t.numel, buffer + t.offset);
      k += t.numel;
    }
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_tp_allreduce(void* buf, size_t count, collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_tp_allreduce", [&] {
    const collx_opts_t o = stream_opts();
    collx_status_t st = collx_allreduce(buf, buf, count, datatype, COLLX_SUM, tp_comm, &o);
    return st == COLLX_OK ? st : comm_fail(tp_comm, st, "collx_tp_allreduce");
  });
}

COLLX_API collx_status_t collx_tp_iallreduce(void* buf, size_t count, collx_datatype_t datatype,
                                             collx_comm_t tp_comm, collx_request_t* request) {
  return free_call("collx_tp_iallreduce", [&] {
    const collx_opts_t o = stream_opts();
    collx_status_t st = collx_iallreduce(buf, buf, count, datatype, COLLX_SUM, tp_comm, &o, request);
    return st == COLLX_OK ? st : comm_fail(tp_comm, st, "collx_tp_iallreduce");
  });
}

COLLX_API collx_status_t collx_tp_split_last(const void* in, void* out, size_t rows, size_t cols,
                                             collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_tp_split_last", [&] { return last_split(in, out, rows, cols, datatype, tp_comm); });
}

COLLX_API collx_status_t collx_tp_gather_last(const void* in, void* out, size_t rows, size_t cols_local,
                                              collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_tp_gather_last", [&] { return last_gather(in, out, rows, cols_local, datatype, tp_comm); });
}

COLLX_API collx_status_t collx_sp_split_first(const void* in, void* out, size_t rows, size_t cols,
                                              collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_sp_split_first", [&] { return first_split(in, out, rows, cols, datatype, tp_comm); });
}

COLLX_API collx_status_t collx_sp_gather_first(const void* in, void* out, size_t rows_local, size_t cols,
                                               collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_sp_gather_first", [&] {
    const collx_opts_t o = stream_opts();
    collx_status_t st = collx_allgather(in, out, rows_local * cols, datatype, tp_comm, &o);
    return st == COLLX_OK ? st : comm_fail(tp_comm, st, "collx_sp_gather_first");
  });
}

COLLX_API collx_status_t collx_sp_reduce_scatter_first(const void* in, void* out, size_t rows, size_t cols,
                                                       collx_datatype_t datatype, collx_comm_t tp_comm) {
  return free_call("collx_sp_reduce_scatter_first",
                   [&] { return first_reduce_scatter(in, out, rows, cols, datatype, tp_comm); });
}

COLLX_API collx_status_t collx_tp_vocab_range(int64_t vocab, int32_t tp_size, int32_t tp_rank, int64_t* start,
                                              int64_t* end) {
  if (vocab < 0 || tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size || !start || !end)
    return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_vocab_range: need vocab >= 0, 0 <= tp_rank < tp_size and "
                                            "non-NULL start and end");
  const int64_t per = (vocab + tp_size - 1) / tp_size;
  *start = std::min(vocab, per * tp_rank);
  *end = std::min(vocab, *start + per);
  return COLLX_OK;
}

COLLX_API collx_status_t collx_tp_finalize_grads(collx_layout_t layout, float* buffer, collx_comm_t tp_comm) {
  if (!layout || !buffer) return free_fail(COLLX_ERR_INVALID_ARG, "collx_tp_finalize_grads: layout or buffer is NULL");
  return free_call("collx_tp_finalize_grads", [&] { return finalize(layout, buffer, tp_comm); });
}

}  // extern "C"
