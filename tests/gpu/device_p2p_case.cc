// See device_p2p_case.h.
#include "tests/gpu/device_p2p_case.h"

#include <cstdint>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {
namespace {

std::vector<int32_t> pattern(size_t count, int rank, unsigned salt) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(rank * 7919 + i * 31 + salt);
  return v;
}

}  // namespace

std::string run_p2p_ring(const P2pCase& c, int rank, int size, collx_comm_t comm, void* stream, unsigned salt) {
  const size_t bytes = c.count * sizeof(int32_t);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const std::string what = "count " + std::to_string(c.count) + (c.nonblocking ? " isend/irecv" : " send/recv") +
                           (c.explicit_kind ? " COLLX_MEM_CUDA" : " COLLX_MEM_AUTO") + " rank " +
                           std::to_string(rank) + " of " + std::to_string(size);
  DeviceBuffer send(bytes + 4), recv(bytes + 4);  // never empty: a zero-count call still passes a device pointer
  if (!send.ok() || !recv.ok()) return what + ": device allocation failed";
  // The send buffer's contents arrive by a copy queued on the stream, not yet run.
  const std::vector<int32_t> mine = pattern(c.count, rank, salt);
  if (bytes > 0 &&
      !cuda::copy_async(send.get(), mine.data(), bytes, cuda::CopyKind::kHostToDevice, stream).ok()) {
    return what + ": copy_async failed";
  }
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = c.explicit_kind ? COLLX_MEM_CUDA : COLLX_MEM_AUTO;
  opts.stream = stream;
  collx_status_t st_send = COLLX_OK, st_recv = COLLX_OK;
  if (c.nonblocking) {
    collx_request_t rreq = nullptr, sreq = nullptr;
    st_recv = collx_irecv(recv.get(), c.count, COLLX_INT32, prev, 5, comm, &opts, &rreq);
    st_send = collx_isend(send.get(), c.count, COLLX_INT32, next, 5, comm, &opts, &sreq);
    if (sreq) st_send = collx_wait(sreq, -1);
    if (rreq) st_recv = collx_wait(rreq, -1);
    if (sreq) collx_request_free(sreq);
    if (rreq) collx_request_free(rreq);
  } else if (rank % 2 == 0) {
    st_send = collx_send(send.get(), c.count, COLLX_INT32, next, 5, comm, &opts);
    st_recv = collx_recv(recv.get(), c.count, COLLX_INT32, prev, 5, comm, &opts);
  } else {
    st_recv = collx_recv(recv.get(), c.count, COLLX_INT32, prev, 5, comm, &opts);
    st_send = collx_send(send.get(), c.count, COLLX_INT32, next, 5, comm, &opts);
  }
  if (st_send != COLLX_OK || st_recv != COLLX_OK) {
    return what + ": send " + collx_status_string(st_send) + ", recv " + collx_status_string(st_recv) + ": " +
           collx_last_error(comm);
  }
  // Read back on the same stream: the copy to the device must be queued before this one.
  std::vector<int32_t> got(c.count, -1);
  if (bytes > 0 &&
      !cuda::copy_async(got.data(), recv.get(), bytes, cuda::CopyKind::kDeviceToHost, stream).ok()) {
    return what + ": read-back copy_async failed";
  }
  if (!cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok()) {
    return what + ": waiting for the stream failed";
  }
  const std::vector<int32_t> want = pattern(c.count, prev, salt);
  for (size_t i = 0; i < c.count; ++i) {
    if (got[i] != want[i]) {
      return what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
    }
  }
  return "";
}

std::string run_p2p_rings(int rank, int size, collx_comm_t comm, void* stream) {
  const size_t counts[] = {0, 1, 1031, size_t{1} << 20};  // 4 MiB of int32 last
  unsigned salt = 0;
  for (size_t count : counts) {
    for (bool nonblocking : {false, true}) {
      ++salt;
      const std::string failure = run_p2p_ring(P2pCase{count, nonblocking, salt % 2 == 0}, rank, size, comm, stream, salt);
      if (!failure.empty()) return failure;
    }
  }
  return "";
}

}  // namespace testing
}  // namespace collx
