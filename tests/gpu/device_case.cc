#include "tests/gpu/device_case.h"

#include <cstring>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {

namespace {

collx_status_t call(collx_coll_t coll, const void* send, void* recv, size_t count, collx_datatype_t dt, collx_op_t op,
                    int root, collx_comm_t comm, const collx_opts_t* opts) {
  switch (coll) {
    case COLLX_COLL_ALLREDUCE: return collx_allreduce(send, recv, count, dt, op, comm, opts);
    case COLLX_COLL_REDUCE_SCATTER: return collx_reduce_scatter(send, recv, count, dt, op, comm, opts);
    case COLLX_COLL_ALLGATHER: return collx_allgather(send, recv, count, dt, comm, opts);
    case COLLX_COLL_BROADCAST: return collx_broadcast(send, recv, count, dt, root, comm, opts);
    case COLLX_COLL_REDUCE: return collx_reduce(send, recv, count, dt, op, root, comm, opts);
    default: return collx_alltoall(send, recv, count, dt, comm, opts);
  }
}

}  // namespace

bool reduces(collx_coll_t c) {
  return c == COLLX_COLL_ALLREDUCE || c == COLLX_COLL_REDUCE_SCATTER || c == COLLX_COLL_REDUCE;
}

std::string DeviceCase::name(const char* route, int size) const {
  return std::string(route) + " np=" + std::to_string(size) + " " + collx_coll_name(coll) + " " + datatype_name(dt) +
         (reduces(coll) ? std::string(" ") + op_name(op) : "") + " count=" + std::to_string(count) +
         (in_place ? " in-place" : "") + " root=" + std::to_string(root);
}

std::string run_device_case(const DeviceCase& c, const char* route, int rank, int size, collx_comm_t comm,
                            void* stream) {
  const std::string what = c.name(route, size) + ", rank " + std::to_string(rank);
  const size_t n = static_cast<size_t>(size), element = datatype_size(c.dt);
  size_t send_count = c.count, recv_count = c.count;
  if (c.coll == COLLX_COLL_REDUCE_SCATTER) send_count *= n;
  if (c.coll == COLLX_COLL_ALLGATHER) recv_count *= n;
  if (c.coll == COLLX_COLL_ALLTOALL) send_count *= n, recv_count *= n;
  // In place: one buffer, laid out as the collective's in-place form says.
  const bool in_place = c.in_place && c.coll != COLLX_COLL_ALLTOALL &&
                        !((c.coll == COLLX_COLL_BROADCAST || c.coll == COLLX_COLL_REDUCE) && rank != c.root);
  const size_t buf_count = in_place ? (send_count > recv_count ? send_count : recv_count) : 0;
  size_t send_offset = 0, recv_offset = 0;  // elements into the in-place buffer
  if (in_place && c.coll == COLLX_COLL_REDUCE_SCATTER) recv_offset = static_cast<size_t>(rank) * c.count;
  if (in_place && c.coll == COLLX_COLL_ALLGATHER) send_offset = static_cast<size_t>(rank) * c.count;

  auto input = exact_data(c.dt, send_count, rank, static_cast<unsigned>(c.count));
  std::vector<uint8_t> host_buf(buf_count * element, 0x5a);
  std::vector<uint8_t> host_send(input), host_recv(recv_count * element, 0x5a);
  const void* hs = host_send.data();
  void* hr = host_recv.data();
  if (in_place) {
    std::memcpy(host_buf.data() + send_offset * element, input.data(), input.size());
    hs = host_buf.data() + send_offset * element;
    hr = host_buf.data() + recv_offset * element;
  }
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.premul_scalar = 2.0;
  opts.mem_kind = COLLX_MEM_HOST;
  if (call(c.coll, hs, hr, c.count, c.dt, c.op, c.root, comm, &opts) != COLLX_OK) {
    return what + " (host reference): " + collx_last_error(comm);
  }

  DeviceBuffer dsend(in_place ? 0 : input.size(), input.data());
  std::vector<uint8_t> init(in_place ? host_buf.size() : recv_count * element, 0x5a);
  if (in_place) std::memcpy(init.data() + send_offset * element, input.data(), input.size());
  DeviceBuffer drecv(init.size(), init.data());
  if (!dsend.ok() || !drecv.ok()) return what + ": device buffers could not be allocated";
  const void* ds = in_place ? drecv.get() + send_offset * element : dsend.get();
  void* dr = drecv.get() + recv_offset * element;
  opts.mem_kind = c.explicit_kind ? COLLX_MEM_CUDA : COLLX_MEM_AUTO;
  opts.stream = stream;
  if (call(c.coll, ds, dr, c.count, c.dt, c.op, c.root, comm, &opts) != COLLX_OK) {
    return what + " (device): " + collx_last_error(comm);
  }
  if (!cuda::stream_wait(opts.stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok()) {
    return what + ": waiting for the stream failed";
  }
  if (c.coll == COLLX_COLL_REDUCE && rank != c.root) return "";  // recvbuf is not written
  const size_t check_bytes = recv_count * element;
  auto got = drecv.read(recv_offset * element, check_bytes);
  if (got.size() != check_bytes) return what + ": reading the result back failed";
  const uint8_t* want = static_cast<const uint8_t*>(hr);
  for (size_t i = 0; i < check_bytes; i += element) {
    if (std::memcmp(got.data() + i, want + i, element) != 0) {
      return what + ": element " + std::to_string(i / element) + " differs from the host result";
    }
  }
  return "";
}

}  // namespace testing
}  // namespace collx
