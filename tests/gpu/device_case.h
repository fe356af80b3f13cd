// One device-buffer collective checked against the same call on host buffers, on one rank:
// shared by the thread-rank (device_collectives_test) and process-rank
// (device_collectives_process_test) tiers.
#pragma once

#include <cstdint>
#include <string>

#include "collx/collx.h"

namespace collx {
namespace testing {

bool reduces(collx_coll_t coll);

// A device route and the transport mask that selects it: staging through pinned memory (tcp
// only), CUDA IPC (shm allowed, ranks on one host), NCCL where it accepts the ranks.
struct DeviceRoute {
  const char* name;
  uint32_t transports;
};
constexpr DeviceRoute kStagedRoute{"staged", COLLX_TRANSPORT_TCP};
constexpr DeviceRoute kIpcRoute{"ipc", COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_SHM};
constexpr DeviceRoute kNcclRoute{"nccl", COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL};

struct DeviceCase {
  collx_coll_t coll;
  collx_datatype_t dt;
  collx_op_t op;
  size_t count;
  bool in_place;
  int root;
  bool explicit_kind;  // opts->mem_kind = COLLX_MEM_CUDA (else detected)
  std::string name(const char* route, int size) const;
};

// Runs `c` on this rank: the host call (reference), then the device call ordered on `stream`,
// then compares bit for bit. Returns "" or what failed (every rank must call it).
std::string run_device_case(const DeviceCase& c, const char* route, int rank, int size, collx_comm_t comm,
                            void* stream);

}  // namespace testing
}  // namespace collx
