// The core's collectives on CUDA device buffers, checked bit for bit against the same call on
// host buffers through the same communicator (the host path is what the fast tier checks
// against its double-precision reference). Every collective, datatype and op, in place and
// not, world sizes 1-4, over each device route: staging through pinned memory (tcp only),
// CUDA IPC (shm allowed, ranks on one host) and NCCL where it accepts the ranks (one rank per
// GPU; ranks sharing a GPU fall back, which is checked too). Data are small integers, so every
// route must give exactly the host's bits.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

struct Route {
  const char* name;
  uint32_t transports;
};
const Route kRoutes[] = {{"staged", COLLX_TRANSPORT_TCP},
                         {"ipc", COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_SHM},
                         {"nccl", COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL}};

bool reduces(collx_coll_t c) {
  return c == COLLX_COLL_ALLREDUCE || c == COLLX_COLL_REDUCE_SCATTER || c == COLLX_COLL_REDUCE;
}

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

struct Case {
  collx_coll_t coll;
  collx_datatype_t dt;
  collx_op_t op;
  size_t count;
  bool in_place;
  int root;
  bool explicit_kind;  // opts->mem_kind = COLLX_MEM_CUDA (else detected)
  std::string name(const char* route, int size) const {
    return std::string(route) + " np=" + std::to_string(size) + " " + collx_coll_name(coll) + " " +
           datatype_name(dt) + (reduces(coll) ? std::string(" ") + op_name(op) : "") + " count=" +
           std::to_string(count) + (in_place ? " in-place" : "") + " root=" + std::to_string(root);
  }
};

// Runs one case on every rank: host call (reference) then device call; compares.
void run_case(ThreadRanks& world, const char* route, const Case& c, void* stream_of_rank[]) {
  const int size = world.size();
  const std::string what = c.name(route, size);
  world.run([&](int rank, collx_comm_t comm) {
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
    ASSERT_EQ(COLLX_OK, call(c.coll, hs, hr, c.count, c.dt, c.op, c.root, comm, &opts))
        << what << " (host reference), rank " << rank << ": " << collx_last_error(comm);

    DeviceBuffer dsend(in_place ? 0 : input.size(), input.data());
    std::vector<uint8_t> init(in_place ? host_buf.size() : recv_count * element, 0x5a);
    if (in_place) std::memcpy(init.data() + send_offset * element, input.data(), input.size());
    DeviceBuffer drecv(init.size(), init.data());
    ASSERT_TRUE(dsend.ok() && drecv.ok()) << what;
    const void* ds = in_place ? drecv.get() + send_offset * element : dsend.get();
    void* dr = drecv.get() + recv_offset * element;
    opts.mem_kind = c.explicit_kind ? COLLX_MEM_CUDA : COLLX_MEM_AUTO;
    opts.stream = stream_of_rank[rank];
    ASSERT_EQ(COLLX_OK, call(c.coll, ds, dr, c.count, c.dt, c.op, c.root, comm, &opts))
        << what << " (device), rank " << rank << ": " << collx_last_error(comm);
    ASSERT_TRUE(cuda::stream_wait(opts.stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok()) << what;
    if (c.coll == COLLX_COLL_REDUCE && rank != c.root) return;  // recvbuf is not written
    const size_t check_bytes = recv_count * element;
    auto got = drecv.read(recv_offset * element, check_bytes);
    ASSERT_EQ(got.size(), check_bytes) << what;
    const uint8_t* want = static_cast<const uint8_t*>(hr);
    for (size_t i = 0; i < check_bytes; i += element) {
      if (std::memcmp(got.data() + i, want + i, element) != 0) {
        ADD_FAILURE() << what << ": rank " << rank << " element " << i / element << " differs from the host result";
        return;
      }
    }
  });
}

class DeviceCollectives : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCollectives, MatchHostResultsOnEveryRoute) {
  const int size = GetParam();
  const collx_coll_t colls[] = {COLLX_COLL_ALLREDUCE, COLLX_COLL_REDUCE_SCATTER, COLLX_COLL_ALLGATHER,
                                COLLX_COLL_BROADCAST, COLLX_COLL_REDUCE, COLLX_COLL_ALLTOALL};
  for (const Route& route : kRoutes) {
    ThreadRanks world(size, 60000, route.transports);
    ASSERT_TRUE(world.ok()) << route.name << ": " << world.error();
    std::vector<void*> streams(static_cast<size_t>(size), nullptr);
    for (int r = 1; r < size; ++r) ASSERT_TRUE(cuda::stream_create(&streams[static_cast<size_t>(r)]).ok());
    unsigned variant = 0;
    for (collx_coll_t coll : colls) {
      for (int d = 0; d < COLLX_NUM_DATATYPES; ++d) {
        for (int o = 0; o < (reduces(coll) ? COLLX_NUM_OPS : 1); ++o) {
          for (bool in_place : {false, true}) {
            ++variant;
            Case c{coll, static_cast<collx_datatype_t>(d), static_cast<collx_op_t>(o),
                   variant % 3 == 0 ? size_t{1} : size_t{1031}, in_place, static_cast<int>(variant % size),
                   variant % 2 == 0};
            run_case(world, route.name, c, streams.data());
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
    // Large calls: 3 and 4 staging chunks of 8 MiB (both slots reused), every IPC slice,
    // vector loads with odd tails.
    const Case big[] = {
        {COLLX_COLL_ALLREDUCE, COLLX_FLOAT32, COLLX_SUM, (size_t{5} << 20) + 3, false, 0, false},
        {COLLX_COLL_ALLREDUCE, COLLX_BFLOAT16, COLLX_AVG, (size_t{11} << 20) + 1, true, 0, true},
        {COLLX_COLL_REDUCE, COLLX_INT32, COLLX_MAX, (size_t{6} << 20) + 5, false, size - 1, false},
        {COLLX_COLL_BROADCAST, COLLX_INT8, COLLX_SUM, (size_t{25} << 20) + 7, true, size / 2, true}};
    for (const Case& c : big) {
      run_case(world, route.name, c, streams.data());
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (void* s : streams) cuda::stream_destroy(s);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace testing
}  // namespace collx
