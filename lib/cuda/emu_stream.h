// Streams of the emulated device: asynchronous in-order queues, one worker thread each, that
// block on a condition variable (never spin). Events are completion flags set by a marker
// queued on a stream. The legacy default stream (nullptr or cudaStreamLegacy) and the
// per-thread default stream (cudaStreamPerThread) are created on first use per device; they
// synchronise with each other as CUDA's blocking default streams do (created streams are
// non-blocking, as the real layer creates them). Each queued operation first sleeps a random
// time up to COLLX_TEST_DEVICE_DELAY_US.
#pragma once

#include <functional>

#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {
namespace cuda {
namespace emu {

// Queues `work` on the stream `handle` of the current device; `what` names the operation in
// errors (an unknown or destroyed stream handle). `work` runs on the stream's worker.
Status enqueue(void* handle, const char* what, std::function<Status()> work);
// Queues `work` on the legacy default stream and waits for it (blocking copies).
Status run_blocking(const char* what, std::function<Status()> work);

}  // namespace emu
}  // namespace cuda
}  // namespace collx
