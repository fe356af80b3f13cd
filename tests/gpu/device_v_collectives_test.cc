// The v-collectives (all-gatherv, reduce-scatterv, gatherv, scatterv, all-to-allv, blocking
// and nonblocking) on CUDA device buffers, checked byte for byte against the same call on
// host buffers: counts that differ by rank (empty blocks included), displacements with gaps
// (the device bytes between blocks must be left as they were), in place where the call has
// an in-place form, on the routes' transport masks (every one stages the v-collectives).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

struct VCase {
  collx_coll_t coll;
  collx_datatype_t dt;
  collx_op_t op;
  bool in_place;
  int root;
  bool nonblocking;
  bool explicit_kind;
  unsigned salt;
};

// Elements rank `from` sends rank `to` (all-to-allv) or rank `from`'s block: 0..4.
size_t block(unsigned salt, int from, int to) { return (salt + 3u * static_cast<unsigned>(from) + static_cast<unsigned>(to)) % 5u; }

// Displacements with a one-element gap after every block.
std::vector<size_t> gapped(const std::vector<size_t>& counts) {
  std::vector<size_t> displs(counts.size());
  size_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) displs[r] = at, at += counts[r] + 1;
  return displs;
}

size_t extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) end = std::max(end, displs[r] + counts[r]);
  return end;
}

// One rank's arguments of a case: the arrays, and its send and receive buffers' layout.
struct Layout {
  std::vector<size_t> counts, displs, send_counts, send_displs;
  size_t own = 0;          // sendcount / recvcount
  size_t send_elements = 0, recv_elements = 0;
  bool sends = true, receives = true;  // sendbuf / recvbuf used on this rank
  size_t own_at = 0;       // in place: the own block's offset in the one buffer
  bool own_in_recv = true;  // in place: the one buffer is the receive side
};

Layout layout_of(const VCase& c, int rank, int size) {
  Layout l;
  const bool root = rank == c.root;
  for (int r = 0; r < size; ++r) l.counts.push_back(block(c.salt, r, 0));
  l.displs = gapped(l.counts);
  const size_t me = static_cast<size_t>(rank);
  switch (c.coll) {
    case COLLX_COLL_ALLGATHERV:
      l.own = l.counts[me];
      l.send_elements = l.own, l.recv_elements = extent(l.counts, l.displs);
      l.own_at = l.displs[me];
      break;
    case COLLX_COLL_REDUCE_SCATTERV:
      l.own = l.counts[me];
      l.displs.assign(l.counts.size(), 0);  // packed (the API's layout)
      for (size_t r = 1; r < l.counts.size(); ++r) l.displs[r] = l.displs[r - 1] + l.counts[r - 1];
      l.send_elements = extent(l.counts, l.displs), l.recv_elements = l.own;
      l.own_at = l.displs[me], l.own_in_recv = false;
      break;
    case COLLX_COLL_GATHERV:
      l.own = l.counts[me];
      l.send_elements = l.own, l.recv_elements = root ? extent(l.counts, l.displs) : 0;
      l.receives = root, l.own_at = l.displs[me];
      break;
    case COLLX_COLL_SCATTERV:
      l.own = l.counts[me];
      l.send_elements = root ? extent(l.counts, l.displs) : 0, l.recv_elements = l.own;
      l.sends = root, l.own_at = l.displs[me], l.own_in_recv = false;
      break;
    default:  // all-to-allv
      l.counts.clear();
      for (int r = 0; r < size; ++r) {
        l.send_counts.push_back(block(c.salt, rank, r));
        l.counts.push_back(block(c.salt, r, rank));
      }
      l.send_displs = gapped(l.send_counts), l.displs = gapped(l.counts);
      l.send_elements = extent(l.send_counts, l.send_displs), l.recv_elements = extent(l.counts, l.displs);
      break;
  }
  return l;
}

collx_status_t call_v(const VCase& c, const Layout& l, const void* send, void* recv, collx_comm_t comm,
                      const collx_opts_t* opts) {
  collx_request_t request = nullptr;
  collx_request_t* req = c.nonblocking ? &request : nullptr;
  collx_status_t st;
  switch (c.coll) {
    case COLLX_COLL_ALLGATHERV:
      st = req ? collx_iallgatherv(send, l.own, recv, l.counts.data(), l.displs.data(), c.dt, comm, opts, req)
               : collx_allgatherv(send, l.own, recv, l.counts.data(), l.displs.data(), c.dt, comm, opts);
      break;
    case COLLX_COLL_REDUCE_SCATTERV:
      st = req ? collx_ireduce_scatterv(send, recv, l.counts.data(), c.dt, c.op, comm, opts, req)
               : collx_reduce_scatterv(send, recv, l.counts.data(), c.dt, c.op, comm, opts);
      break;
    case COLLX_COLL_GATHERV:
      st = req ? collx_igatherv(send, l.own, recv, l.counts.data(), l.displs.data(), c.dt, c.root, comm, opts, req)
               : collx_gatherv(send, l.own, recv, l.counts.data(), l.displs.data(), c.dt, c.root, comm, opts);
      break;
    case COLLX_COLL_SCATTERV:
      st = req ? collx_iscatterv(send, l.counts.data(), l.displs.data(), recv, l.own, c.dt, c.root, comm, opts, req)
               : collx_scatterv(send, l.counts.data(), l.displs.data(), recv, l.own, c.dt, c.root, comm, opts);
      break;
    default:
      st = req ? collx_ialltoallv(send, l.send_counts.data(), l.send_displs.data(), recv, l.counts.data(),
                                  l.displs.data(), c.dt, comm, opts, req)
               : collx_alltoallv(send, l.send_counts.data(), l.send_displs.data(), recv, l.counts.data(),
                                 l.displs.data(), c.dt, comm, opts);
      break;
  }
  if (st != COLLX_OK || !req) return st;
  st = collx_wait(request, -1);
  collx_request_free(request);
  return st;
}

// Runs `c` on this rank on host buffers, then on device buffers; "" or what differs.
std::string run_v_case(const VCase& c, int rank, int size, collx_comm_t comm, void* stream) {
  const std::string what = std::string(collx_coll_name(c.coll)) + " " + datatype_name(c.dt) + " np=" +
                           std::to_string(size) + " root=" + std::to_string(c.root) + " salt=" +
                           std::to_string(c.salt) + (c.in_place ? " in-place" : "") +
                           (c.nonblocking ? " nonblocking" : "") + ", rank " + std::to_string(rank);
  const Layout l = layout_of(c, rank, size);
  const size_t element = datatype_size(c.dt);
  // In place (allgatherv, reduce-scatterv; gatherv and scatterv at the root): one buffer, the
  // own block at own_at of it.
  const bool in_place = c.in_place && c.coll != COLLX_COLL_ALLTOALLV &&
                        !((c.coll == COLLX_COLL_GATHERV || c.coll == COLLX_COLL_SCATTERV) && rank != c.root);
  const auto input = exact_data(c.dt, l.sends ? l.send_elements : 0, rank, c.salt);
  // Host and device get the same initial bytes: [send | recv], or the one in-place buffer.
  std::vector<uint8_t> send_init(input), recv_init(l.recv_elements * element, 0x5a);
  if (in_place && l.own_in_recv && l.own > 0) {  // an empty block: input.data() may be NULL
    std::memcpy(recv_init.data() + l.own_at * element, input.data(), l.own * element);
  }
  auto place = [&](char* send_base, char* recv_base, const void** s, void** r) {
    *s = l.sends ? send_base : nullptr;
    *r = l.receives ? recv_base : nullptr;
    if (!in_place) return;
    if (l.own_in_recv) {
      *s = recv_base + l.own_at * element;
    } else {
      *r = send_base + l.own_at * element;
    }
  };
  std::vector<uint8_t> hsend(send_init), hrecv(recv_init);
  const void* hs;
  void* hr;
  place(reinterpret_cast<char*>(hsend.data()), reinterpret_cast<char*>(hrecv.data()), &hs, &hr);
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = COLLX_MEM_HOST;
  if (call_v(c, l, hs, hr, comm, &opts) != COLLX_OK) return what + " (host reference): " + collx_last_error(comm);

  DeviceBuffer dsend(send_init.size(), send_init.data()), drecv(recv_init.size(), recv_init.data());
  if (!dsend.ok() || !drecv.ok()) return what + ": device buffers could not be allocated";
  const void* ds;
  void* dr;
  place(dsend.get(), drecv.get(), &ds, &dr);
  opts.mem_kind = c.explicit_kind ? COLLX_MEM_CUDA : COLLX_MEM_AUTO;
  opts.stream = stream;
  if (call_v(c, l, ds, dr, comm, &opts) != COLLX_OK) return what + " (device): " + collx_last_error(comm);
  if (!cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok()) {
    return what + ": waiting for the stream failed";
  }
  // Everything the host call left in its buffers, gaps included (and the in-place buffer).
  const std::vector<uint8_t>& want = in_place ? (l.own_in_recv ? hrecv : hsend) : hrecv;
  const DeviceBuffer& got_buffer = in_place ? (l.own_in_recv ? drecv : dsend) : drecv;
  const auto got = got_buffer.read(0, want.size());
  if (got.size() != want.size()) return what + ": reading the result back failed";
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return what + ": byte " + std::to_string(i) + " differs from the host result";
  }
  return "";
}

class DeviceVCollectives : public ::testing::TestWithParam<int> {};

TEST_P(DeviceVCollectives, MatchHostResultsWithGapsEmptyBlocksAndInPlace) {
  const int size = GetParam();
  const collx_coll_t colls[] = {COLLX_COLL_ALLGATHERV, COLLX_COLL_REDUCE_SCATTERV, COLLX_COLL_GATHERV,
                                COLLX_COLL_SCATTERV, COLLX_COLL_ALLTOALLV};
  for (const DeviceRoute& route : {kStagedRoute, kIpcRoute}) {
    ThreadRanks world(size, 60000, route.transports);
    ASSERT_TRUE(world.ok()) << route.name << ": " << world.error();
    // Created streams: a nonblocking call waits on its stream for the other ranks, which must
    // not be queued behind it (threads of one process share the legacy default stream).
    std::vector<void*> streams(static_cast<size_t>(size), nullptr);
    for (void*& s : streams) ASSERT_TRUE(cuda::stream_create(&s).ok());
    unsigned variant = 0;
    for (collx_coll_t coll : colls) {
      for (collx_datatype_t dt : {COLLX_INT32, COLLX_FLOAT16, COLLX_FLOAT64}) {
        for (bool in_place : {false, true}) {
          ++variant;
          const VCase c{coll,      dt, variant % 2 ? COLLX_SUM : COLLX_MAX, in_place, static_cast<int>(variant % size),
                        variant % 3 == 0, variant % 2 == 0, variant};
          world.run([&](int rank, collx_comm_t comm) {
            const std::string failure = run_v_case(c, rank, size, comm, streams[static_cast<size_t>(rank)]);
            if (!failure.empty()) ADD_FAILURE() << route.name << ": " << failure;
          });
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
    for (void* s : streams) cuda::stream_destroy(s);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceVCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace testing
}  // namespace collx
