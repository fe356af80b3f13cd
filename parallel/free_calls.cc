// Error reporting shared by the handle-less calls of the parallel layer.
#include "parallel/free_calls.h"

#include "parallel/dp_internal.h"

namespace collx {
namespace parallel {

std::string float_layout_problem(collx_layout_t l, int32_t comm_size) {
  if (!l->finalized) return "the layout is not finalized (call collx_layout_finalize)";
  if (l->config.dp_size != comm_size)
    return "the layout was planned for dp_size " + std::to_string(l->config.dp_size) + " but dp_comm has " +
           std::to_string(comm_size) + " ranks";
  for (const auto& t : l->tensors)
    if (t.dtype != COLLX_FLOAT32)
      return "tensor " + std::to_string(t.id) + " has datatype " +
             collx_datatype_name(static_cast<collx_datatype_t>(t.dtype)) +
             "; the buffers are float32 (register gradients and parameters as COLLX_FLOAT32)";
  return "";
}

collx_status_t comm_fail(collx_comm_t comm, collx_status_t st, const char* fn) {
  return free_fail(st, std::string(fn) + ": " + comm_error(comm, st));
}

collx_status_t group_shape(collx_comm_t comm, const char* fn, GroupShape* out) {
  if (!comm) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": tp_comm is NULL");
  int32_t size = 0, rank = 0;
  collx_status_t st = collx_comm_size(comm, &size);
  if (st == COLLX_OK) st = collx_comm_rank(comm, &rank);
  if (st != COLLX_OK) return comm_fail(comm, st, fn);
  out->size = static_cast<size_t>(size);
  out->rank = static_cast<size_t>(rank);
  return COLLX_OK;
}

}  // namespace parallel
}  // namespace collx
