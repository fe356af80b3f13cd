// The backend table (backend.h): each kind's capability check and constructor, found in its
// own folder, so lib/core reaches a backend through this file only.
#include "backends/backend.h"

#include "backends/cuda_ipc/ipc_coll.h"
#include "backends/nccl/nccl_comm.h"

namespace collx {
namespace backend {
namespace {

struct BackendRow {
  BackendKind kind;
  bool (*supports)(collx_coll_t coll, int size);
  Status (*create)(const BackendSetup& setup, std::unique_ptr<Backend>* out);
};

constexpr BackendRow kBackends[] = {
    {BackendKind::kNccl, nccl::supports, nccl::create_backend},
    {BackendKind::kCudaIpc, cuda_ipc::supports, cuda_ipc::create_backend},
};

const BackendRow* row_of(BackendKind kind) {
  for (const BackendRow& row : kBackends) {
    if (row.kind == kind) return &row;
  }
  return nullptr;
}

}  // namespace

bool supports(BackendKind kind, collx_coll_t coll, int size) {
  const BackendRow* row = row_of(kind);
  return row && row->supports(coll, size);
}

Status create(BackendKind kind, const BackendSetup& setup, std::unique_ptr<Backend>* out) {
  const BackendRow* row = row_of(kind);
  if (!row) return make_status(COLLX_ERR_INTERNAL, "unknown backend kind %d", static_cast<int>(kind));
  return row->create(setup, out);
}

}  // namespace backend
}  // namespace collx
