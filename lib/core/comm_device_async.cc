// Nonblocking collectives on device buffers that NCCL does not take, ordered on the caller's
// stream without the host waiting for it (docs/cuda.md, "What blocks the host"). The calling
// thread queues, on the stream, after the work already there:
//   [copies of the input to pinned staging] -> a host function that raises the "input" flag
//   -> a stream-side wait for the "result" flag -> [copies of the result back] -> an event
// and returns. The copies are there when the route can only be staging; where CUDA IPC may
// take the call ("gated"), the executor runs the whole device route (IPC, or staging when it
// falls back) on its own side stream once the input flag is up, and waits for that stream. The host function only stores a flag (it must not block nor communicate);
// the executor's task waits for that flag (by the call's deadline, or an abort), runs the
// host algorithm on the staging, and raises the "result" flag whatever happened, so the
// stream always drains: a failure is reported by the request, never a hang. The staging
// buffer goes back to the pool once the event says the last copy ended.
#include "lib/common/exception_status.h"
#include "lib/core/comm.h"
#include "lib/core/comm_device.h"
#include "lib/core/staging_plan.h"
#include "lib/cuda/device.h"

#include <chrono>
#include <thread>

namespace collx {

namespace {

// The two flags sit in front of the staged data, a cache line each.
constexpr size_t kFlagsBytes = 128;
uint32_t* input_flag(char* pinned) { return reinterpret_cast<uint32_t*>(pinned); }
uint32_t* result_flag(char* pinned) { return reinterpret_cast<uint32_t*>(pinned + 64); }
void raise(uint32_t* flag) { __atomic_store_n(flag, 1u, __ATOMIC_RELEASE); }
void raise_from_stream(void* flag) { raise(static_cast<uint32_t*>(flag)); }  // the host function

// Waits (polling, yielding) until the stream raised the input flag.
Status wait_input(const uint32_t* flag, Deadline deadline, const std::atomic<bool>* abort) {
  for (int polls = 0; __atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0; ++polls) {
    if (abort->load(std::memory_order_acquire)) {
      return make_status(COLLX_ERR_ABORTED, "collx_comm_abort was called while the collective waited for its stream");
    }
    if (deadline.expired()) {
      return make_status(COLLX_ERR_TIMEOUT, "the caller's stream did not reach the collective (the work queued "
                                            "before it did not finish) before the deadline");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 10 : 200));
  }
  return Status::Ok();
}

// The stream part: everything after the flags are cleared, in stream order.
Status queue_on_stream(const StagingPlan& plan, char* pinned, void* event, void* stream) {
  char* const staging = pinned + kFlagsBytes;
  for (const StagingPlan::Copy& c : plan.in) {
    COLLX_RETURN_IF_ERROR(
        cuda::copy_async(staging + c.host, c.device, c.bytes, cuda::CopyKind::kDeviceToHost, stream));
  }
  COLLX_RETURN_IF_ERROR(cuda::launch_host_func(stream, raise_from_stream, input_flag(pinned)));
  COLLX_RETURN_IF_ERROR(cuda::stream_wait_flag(stream, result_flag(pinned), 1));
  for (const StagingPlan::Copy& c : plan.out) {
    COLLX_RETURN_IF_ERROR(
        cuda::copy_async(c.device, staging + c.host, c.bytes, cuda::CopyKind::kHostToDevice, stream));
  }
  return cuda::event_record(event, stream);
}

}  // namespace

Status Communicator::enqueue_stream_ordered(const CollCall& call, const transport::OpDesc& desc,
                                            const std::shared_ptr<RequestImpl>& request, bool gated) {
  // The sequence number is spent: from here a failure leaves the ranks out of step.
  Status st = [&]() -> Status {
    int device = 0;
    COLLX_RETURN_IF_ERROR(buffer_device(call.recvbuf ? call.recvbuf : call.sendbuf, &device));
    DeviceScope scope;
    COLLX_RETURN_IF_ERROR(scope.enter(device));
    StagingPlan plan;  // gated: nothing to stage here (the executor's route does)
    if (!gated) COLLX_RETURN_IF_ERROR(plan_staging(call, rank_, size_, &plan));
    auto buffer = std::make_shared<P2pStagingPool::Buffer>();
    COLLX_RETURN_IF_ERROR(async_staging_.acquire(kFlagsBytes + plan.bytes, buffer.get()));
    char* const pinned = buffer->pinned;
    *input_flag(pinned) = 0;
    *result_flag(pinned) = 0;
    // From the first queued operation on, the stream may use the buffer: it is only reused
    // once its event (recorded last) is done.
    buffer->pending = true;
    Status queued = queue_on_stream(plan, pinned, buffer->event, call.stream);
    if (!queued.ok()) {
      raise(result_flag(pinned));  // what was queued must not wait forever
      async_staging_.release(*buffer);
      return queued;
    }
    CollCall host = call;  // gated: the device call itself, moved to the side stream below
    if (!gated) {
      host.mem_kind = COLLX_MEM_HOST;
      host.stream = nullptr;
      host.sendbuf = plan.send_at == StagingPlan::kNone ? nullptr : pinned + kFlagsBytes + plan.send_at;
      host.recvbuf = plan.recv_at == StagingPlan::kNone ? nullptr : pinned + kFlagsBytes + plan.recv_at;
    }
    auto finished = std::make_shared<std::atomic<bool>>(false);
    auto done = [this, buffer, request, finished](const Status& result) {
      if (finished->exchange(true)) return;  // the task threw after finishing: once only
      raise(result_flag(buffer->pinned));    // the stream goes on, failure included
      async_staging_.release(*buffer);
      request->finish(result);
    };
    try {
      executor_.submit(
          [this, host, desc, done, timeout_ms = call.timeout_ms, pinned, gated, device]() mutable {
            const Deadline deadline = deadline_for(timeout_ms);
            Status ready = wait_input(input_flag(pinned), deadline, &aborted_);
            if (ready.ok() && gated) {
              DeviceScope on_device;
              ready = on_device.enter(device);
              if (ready.ok()) ready = side_stream(device, &host.stream);
            }
            if (!ready.ok()) {
              // Peers may already wait for this rank: the communicator cannot stay in step.
              ready = ready.with_context(context_of(desc));
              fail(ready);
              done(ready);
              return;
            }
            Status st = execute(host, desc);
            if (st.ok() && gated) {
              // The caller's stream waits for the result flag: the route's work on the side
              // stream must have ended before it is raised.
              st = cuda::stream_wait(host.stream, deadline, &aborted_, "the collective's work on collx's side stream");
              if (!st.ok()) fail(st.with_context(context_of(desc)));
            }
            done(st);
          },
          [this, done](const Status& status) {
            done(status);
            fail(status);
          },
          rank_);
    } catch (...) {
      Status failed = current_exception_status("queueing a nonblocking collective");
      raise(result_flag(pinned));
      async_staging_.release(*buffer);
      return failed;
    }
    return Status::Ok();
  }();
  if (!st.ok()) fail(st);
  return st;
}

}  // namespace collx
