// CUDA IPC: direct all-reduce, reduce-scatter and all-gather between ranks of one host that
// read each other's device memory. Each call exchanges its buffers' IPC handles through the
// bootstrap it is given (the core passes one over the communicator's own host transport, so
// an exchange costs microseconds, not store round trips; ranks in one process pass raw
// pointers instead: CUDA refuses to open a handle
// in the process that made it); mappings are cached per peer allocation. Several ranks may
// share one GPU (NCCL refuses that).
//
// Schedule (n ranks, rank i owns slice i of the elements):
//   wait for the caller's stream; allgather(handles)      -- every input is ready
//   all-reduce: recv_j[slice i] = fold over ranks of send_j[slice i], for every rank j: one
//     kernel reads slice i from every rank and writes it to every rank (2 bytes of HBM
//     traffic per byte of the buffer per rank, the bound check.sh compares against)
//   reduce-scatter: recv[block i] = fold over ranks of send_j[block i]
//   all-gather: recv[block j] = send_j (copies)
//   barrier                                                -- nobody touches my buffers now
// In place is safe: element k of slice i is read and written by one thread of rank i only.
// Every wait ends by the deadline; the result is complete on the caller's stream on return.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "collx/collx.h"
#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace cuda_ipc {

// One collective (ALLREDUCE, REDUCE_SCATTER or ALLGATHER); root, peer and captured are unused.
using Call = backend::DeviceOp;

// Whether the direct schedule handles this call (collective, world size).
bool supports(collx_coll_t coll, int size);

// The mapped peer allocations of one communicator. Not thread-safe: one collective at a time.
class Peers {
 public:
  Peers(int rank, int size) : rank_(rank), size_(size) {}
  ~Peers();
  Peers(const Peers&) = delete;
  Peers& operator=(const Peers&) = delete;

  // Runs one collective. Every rank makes the same sequence of `bootstrap` calls.
  Status run(const Call& call, transport::Bootstrap* bootstrap, Deadline deadline, const std::atomic<bool>* abort);

 private:
  // Every rank's view of `buf` (on this rank): exchanged through the bootstrap.
  Status exchange(transport::Bootstrap* bootstrap, const char* name, const void* buf, std::vector<char*>* ptrs,
                  Deadline deadline);
  Status map(int peer, const uint8_t* handle, void** base);
  // Ranks whose buffers are on different GPUs need peer access between them: checked and
  // enabled (cudaDeviceCanAccessPeer / cudaDeviceEnablePeerAccess) the first time a set of
  // devices (`devices`: every rank's GPU UUID, 16 bytes each, in rank order; `mine`: this
  // rank's) is seen, the verdicts exchanged so every rank decides alike, the result cached.
  // COLLX_ERR_UNSUPPORTED naming the first rank that cannot: the caller stages instead.
  Status check_peer_access(transport::Bootstrap* bootstrap, const std::string& devices, const uint8_t* mine,
                           Deadline deadline);
  // This rank's side: "" in *why when it can reach every other rank's GPU.
  Status local_peer_access(const std::string& devices, const uint8_t* mine, std::string* why);
  static constexpr size_t kVerdictBytes = 160;

  int rank_;
  int size_;
  struct Mapping {
    std::string handle;
    void* base;
  };
  std::vector<Mapping> mappings_;  // oldest first; bounded
  std::vector<std::string> local_devices_;       // UUID of each device this process sees
  std::map<std::string, std::string> verdicts_;  // devices -> "" (peer access) or why not
};

// For backends/backend.cc: Peers wrapped as a backend::Backend, aborting on *setup.abort_flag
// (never fails: mappings are made per call).
Status create_backend(const backend::BackendSetup& setup, std::unique_ptr<backend::Backend>* out);

}  // namespace cuda_ipc
}  // namespace collx
