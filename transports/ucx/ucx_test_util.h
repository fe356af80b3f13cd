// Test helpers for the UCX transport: jobs of ranks as threads (in-memory bootstrap) or as
// forked processes. Content patterns, fork bootstrap and child checks come from the shm
// transport's helpers, which are header-only and transport-neutral apart from their name.
#pragma once

#include <stdlib.h>
#include <sys/mman.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "transports/shm/shm_test_util.h"
#include "transports/ucx/ucx_transport.h"

namespace collx {
namespace ucx_test {

using shm_test::describe_op;
using shm_test::fill;
using shm_test::first_bad;
using shm_test::next_comm_id;
using shm_test::wait_one;
using transport::OpDesc;
using transport::Request;
using TransportPtr = std::unique_ptr<transport::Transport>;

inline UcxTransportParams ucx_params(int rank, int size, uint64_t comm_id, transport::Bootstrap* bootstrap) {
  return transport_test::job_params<UcxTransportParams>(rank, size, comm_id, bootstrap);
}

// Creates `size` transports in threads (creation allgathers) and runs fn(rank, t) in threads.
inline void run_job(int size, const std::function<void(int, transport::Transport*)>& fn) {
  transport_test::run_thread_job(
      size,
      [](int rank, int n, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
        return create_ucx_transport(ucx_params(rank, n, comm, boot), out);
      },
      fn);
}

// Runs fn(rank, t, shared) in `size` forked processes with a transport each; returns exit
// codes. `shared` is a page of int64 visible to every process. peer_errors=false sets
// COLLX_UCX_PEER_ERRORS=0 in the children (UCX may then use shared memory between them).
inline std::vector<int> run_proc_job(int size, const std::function<int(int, transport::Transport*, int64_t*)>& fn,
                                     bool peer_errors = true) {
  shm_test::ProcBoard* board = shm_test::new_proc_board();
  auto* shared =
      static_cast<int64_t*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(shared, 0, 4096);
  const uint64_t comm = next_comm_id();
  auto codes = shm_test::run_processes(size, [&](int rank) -> int {
    if (!peer_errors) ::setenv("COLLX_UCX_PEER_ERRORS", "0", 1);
    shm_test::ProcBootstrap boot(board, rank, size);
    TransportPtr t;
    Status s = create_ucx_transport(ucx_params(rank, size, comm, &boot), &t);
    SHM_CHECK(s.ok(), "%s", s.message().c_str());
    return fn(rank, t.get(), shared);
  });
  ::munmap(board, sizeof(shm_test::ProcBoard));
  ::munmap(shared, 4096);
  return codes;
}

}  // namespace ucx_test
}  // namespace collx
