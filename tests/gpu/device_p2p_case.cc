// See device_p2p_case.h.
#include "tests/gpu/device_p2p_case.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
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

// A stream of its own held by hold_until_open until open() (at the latest when destroyed), and
// an event recorded right after the held work.
struct HeldStream {
  void* stream = nullptr;
  void* after_held = nullptr;
  std::atomic<bool> gate{false};
  bool ok = false;
  HeldStream() {
    ok = cuda::stream_create(&stream).ok() && cuda::event_create(&after_held).ok() &&
         cuda::launch_host_func(stream, hold_until_open, &gate).ok() && cuda::event_record(after_held, stream).ok();
  }
  void open() { gate = true; }
  ~HeldStream() {
    gate = true;
    if (stream) cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ignore();
    if (after_held) cuda::event_destroy(after_held);
    if (stream) cuda::stream_destroy(stream);
  }
};

std::string mismatch(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
    }
  }
  return "";
}

}  // namespace

void hold_until_open(void* gate) {
  while (!static_cast<std::atomic<bool>*>(gate)->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

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
  const std::string wrong = mismatch(got, pattern(c.count, prev, salt));
  return wrong.empty() ? "" : what + ": " + wrong;
}

std::string run_p2p_isend_on_held_stream(int rank, int size, collx_comm_t comm, unsigned salt) {
  const size_t count = 1031, bytes = count * sizeof(int32_t);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const std::string what = "isend on a held stream, rank " + std::to_string(rank) + " of " + std::to_string(size);
  HeldStream held;
  DeviceBuffer send(bytes), recv(bytes);
  if (!held.ok || !send.ok() || !recv.ok()) return what + ": stream or device set-up failed";
  // The device message exists only once the held work ended: a copy queued behind it.
  const std::vector<int32_t> mine = pattern(count, rank, salt), mine_host = pattern(count, rank, salt + 1);
  if (!cuda::copy_async(send.get(), mine.data(), bytes, cuda::CopyKind::kHostToDevice, held.stream).ok()) {
    return what + ": copy_async failed";
  }
  collx_opts_t on_stream, host;
  collx_opts_init(&on_stream, sizeof on_stream);
  collx_opts_init(&host, sizeof host);
  on_stream.stream = held.stream;
  std::vector<int32_t> got_host(count, -1);
  collx_request_t rdev = nullptr, rhost = nullptr, sdev = nullptr, shost = nullptr;
  if (collx_irecv(recv.get(), count, COLLX_INT32, prev, 9, comm, &on_stream, &rdev) != COLLX_OK ||
      collx_irecv(got_host.data(), count, COLLX_INT32, prev, 9, comm, &host, &rhost) != COLLX_OK ||
      collx_isend(send.get(), count, COLLX_INT32, next, 9, comm, &on_stream, &sdev) != COLLX_OK) {
    return what + ": posting failed: " + collx_last_error(comm);
  }
  bool held_done = true;
  int send_done = 1;
  const bool queried = cuda::event_done(held.after_held, &held_done).ok();
  const collx_status_t tested = collx_test(sdev, &send_done);
  const collx_status_t posted_host = collx_isend(mine_host.data(), count, COLLX_INT32, next, 9, comm, &host, &shost);
  held.open();
  std::string failure;
  if (!queried) failure = "event_done failed";
  else if (held_done) failure = "collx_isend returned only after the stream's earlier work ended";
  else if (tested != COLLX_OK || send_done) failure = "collx_test called the send done before its data existed";
  else if (posted_host != COLLX_OK) failure = std::string("the host isend failed: ") + collx_last_error(comm);
  for (collx_request_t r : {sdev, shost, rdev, rhost}) {
    if (!r) continue;
    const collx_status_t st = collx_wait(r, -1);
    if (st != COLLX_OK && failure.empty()) failure = std::string("collx_wait: ") + collx_last_error(comm);
    collx_request_free(r);
  }
  if (!failure.empty()) return what + ": " + failure;
  std::vector<int32_t> got(count, -1);
  if (!cuda::copy_async(got.data(), recv.get(), bytes, cuda::CopyKind::kDeviceToHost, held.stream).ok() ||
      !cuda::stream_wait(held.stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok()) {
    return what + ": reading back failed";
  }
  std::string wrong = mismatch(got, pattern(count, prev, salt));
  if (!wrong.empty()) return what + ": device message (sent first): " + wrong;
  wrong = mismatch(got_host, pattern(count, prev, salt + 1));
  return wrong.empty() ? "" : what + ": host message (sent second, same tag): " + wrong;
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
