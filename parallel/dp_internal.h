// Internals of the data-parallel reducer (collx_dp_*), shared by dp.cc and dp_step.cc and
// reused by ZeRO, which reduce-scatters its gradients through a reducer.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lib/common/deadline.h"
#include "parallel/device_mem.h"
#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

// With a 16-bit wire type, the thread that launches the buckets, owned by the reducer:
// the float32 -> 16-bit rounding (pack), the collective and, on completion, the write-back
// into the float32 buffer (unpack) run here, so the engine's backward thread that marks
// gradients only marks. Buckets are handed over strictly in index order and launched in
// that order; the helper is the only thread using the communicator while a micro-step is
// open (collx_dp_finish waits for it to go idle before its own collective).
class DpHelper {
 public:
  explicit DpHelper(collx_dp_s* dp);
  // Launches what was handed over, waits for it, then stops the thread.
  ~DpHelper();
  DpHelper(const DpHelper&) = delete;
  DpHelper& operator=(const DpHelper&) = delete;
  // Marking thread: bucket b is complete; launch it after the buckets handed over before.
  void launch(size_t b);
  // Waits until every handed-over bucket is launched, finished and written back, or the
  // deadline. COLLX_IN_PROGRESS at the deadline with *bucket the first not finished; the
  // first failure (with *bucket, *msg) otherwise, reported once.
  collx_status_t wait_idle(const Deadline& deadline, size_t* bucket, std::string* msg);
  bool busy();

 private:
  void run();
  void record_error(collx_status_t st, size_t b, const std::string& msg);

  collx_dp_s* dp_;
  std::mutex mu_;
  std::condition_variable work_;  // the helper waits here for buckets (or stop)
  std::condition_variable done_;  // finish waits here for the helper to go idle
  std::deque<size_t> queue_;      // handed over, not launched yet, in order
  std::deque<size_t> flight_;     // launched, not written back yet, in order
  collx_status_t error_ = COLLX_OK;
  size_t error_bucket_ = 0;
  std::string error_msg_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace parallel
}  // namespace collx

struct collx_dp_s {
  struct Bucket {
    size_t start = 0;
    size_t padded = 0;
    size_t num_tensors = 0;
    size_t pending = 0;  // tensors still to be marked in this micro-step
    bool launched = false;
    collx_request_t request = nullptr;  // in flight until finish waits for it
    std::vector<uint16_t> staging;      // the bucket on the wire, for bf16/fp16 compression
  };
  collx_comm_t comm = nullptr;
  int32_t rank = 0;
  int32_t size = 1;
  collx_layout_t layout = nullptr;
  collx_dp_config_t config{};
  float* buffer = nullptr;
  size_t total = 0;
  std::vector<float> owned_buffer;  // when the caller passed no buffer
  // Device buffers (config.mem_kind COLLX_MEM_CUDA): the buffer is device memory, every
  // scaling and zeroing is queued on `stream`, the collectives are ordered on it too.
  bool device = false;
  void* stream = nullptr;
  collx::parallel::DeviceMem owned_device;  // the owned buffer, on the device
  // 16-bit comm_dtype on device buffers: the whole buffer's wire copy (bucket b at
  // buckets[b].start), rounded and widened by kernels on the stream (no helper thread).
  collx::parallel::DeviceMem device_wire;
  // 16-bit grad_dtype (device buffers): the views the engine writes; each bucket is added
  // into the float32 buffer (and zeroed) when it is launched, or at a no_sync finish.
  collx::parallel::DeviceMem device_views;
  float pre = 1.0f;                 // factor applied before the collective
  float post = 1.0f;                // and after it
  std::vector<char> marked;         // per layout tensor (registration order)
  std::vector<Bucket> buckets;
  size_t next_bucket = 0;  // buckets launch strictly in index order
  size_t marks = 0;        // marks in this micro-step
  bool sync = true;
  collx::parallel::ErrorSlot error;
  std::unique_ptr<collx::parallel::DpHelper> helper;  // 16-bit wire types only
};

namespace collx {
namespace parallel {

// Stores msg as the reducer's last error (when dp is not NULL) and returns st.
collx_status_t dp_fail(collx_dp_t dp, collx_status_t st, const std::string& msg);
// The communicator's last error, for messages of failed collx calls.
std::string comm_error(collx_comm_t comm, collx_status_t st);
// Waits for every launched bucket still in flight (each ends by its own deadline).
void dp_drain(collx_dp_t dp);
// 16-bit gradient views: bucket b's views added into the float32 buffer and zeroed, on the
// stream (nothing for float32 views). Sets only *why on failure.
collx_status_t dp_fold_views(collx_dp_t dp, size_t b, std::string* why);
// Pre-scale (and 16-bit rounding) of bucket b, then its asynchronous collective into
// bk.request. Sets nothing on failure but *why (any thread may call it).
collx_status_t dp_start_bucket(collx_dp_t dp, size_t b, std::string* why);
// Writes bucket bk's result back into the float32 buffer and applies the post-scale
// (device buffers: queues the post-scale on the stream; a failure to queue it is returned).
collx_status_t dp_complete_bucket(collx_dp_t dp, collx_dp_s::Bucket& bk, std::string* why);

}  // namespace parallel
}  // namespace collx
