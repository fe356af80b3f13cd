// One ring exchange of point-to-point calls on device buffers, on one rank: shared by the
// thread-rank (device_p2p_test) and process-rank (device_collectives_process_test) tiers.
#pragma once

#include <cstddef>
#include <string>

#include "collx/collx.h"

namespace collx {
namespace testing {

struct P2pCase {
  size_t count;        // int32 elements
  bool nonblocking;    // collx_isend/collx_irecv + collx_wait (else collx_send/collx_recv)
  bool explicit_kind;  // opts->mem_kind = COLLX_MEM_CUDA (else detected)
};

// Every rank sends `c.count` int32 from a device buffer to the next rank and receives from the
// previous one, ordered on `stream`: the send buffer is filled by a copy queued on the stream
// just before the send, the received data read back by a copy queued just after the receive.
// Returns "" or what failed (every rank must call it with the same case and salt).
std::string run_p2p_ring(const P2pCase& c, int rank, int size, collx_comm_t comm, void* stream, unsigned salt);

// run_p2p_ring at 0, 1, odd and 4 MiB sizes, blocking and nonblocking, detected and explicit
// memory kinds; stops at the first failure and returns it ("" when all passed).
std::string run_p2p_rings(int rank, int size, collx_comm_t comm, void* stream);

// A host function (cuda::launch_host_func) that holds its stream until *(std::atomic<bool>*)gate.
void hold_until_open(void* gate);

// collx_isend from a device buffer whose stream is held by earlier work (a host function that
// waits for a gate this rank opens later) must return before that work ended (seen by an
// event recorded between the two, not by time) and not report completion before its data
// exist; a host-buffer isend to the same peer and tag queued after it must arrive second.
// Ring of `size` ranks, on a stream of the rank's own. Returns "" or what failed.
std::string run_p2p_isend_on_held_stream(int rank, int size, collx_comm_t comm, unsigned salt);

}  // namespace testing
}  // namespace collx
