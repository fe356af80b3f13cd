// Device memory and float32 element operations of the parallel layer (device_mem.h), on the
// lib/cuda device layer: the native CUDA backend or the emulated test device alike.
#include "parallel/device_mem.h"

#include <map>
#include <mutex>
#include <utility>

#include "lib/common/deadline.h"
#include "lib/cuda/device.h"

namespace collx {
namespace parallel {

namespace {
// How long freeing device memory waits for the stream that may still use it.
constexpr int64_t kFreeWaitMs = 60000;

// Device blocks the parallel layer freed, kept for reuse per (device, size), as PyTorch's
// caching allocator keeps them. cudaFree synchronizes the whole device: a device-wide wait
// per step, and with several ranks of one process on one device a deadlock, since one rank's
// free then waits for another rank's stream, which waits (stream-ordered i-calls,
// docs/cuda.md) for a collective the first rank has not joined yet. A block comes back only
// after its stream drained, so any stream may reuse it. The same tensors are gathered every
// step, so the cache holds at most the peak of distinct sizes in use at once; it lives until
// the process ends (the device layer may be gone by static destruction).
class BlockCache {
 public:
  void* take(int device, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find({device, bytes});
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    return p;
  }
  void give(int device, size_t bytes, void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(std::make_pair(device, bytes), p);
  }

 private:
  std::mutex mu_;
  std::multimap<std::pair<int, size_t>, void*> free_;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: see above
  return *cache;
}
}  // namespace

std::string device_unavailable() {
  if (!cuda::built_with_cuda())
    return "this collx was built without CUDA (and the emulated test device is off)";
  std::string why;
  if (cuda::device_count(&why) == 0) return "no CUDA device is usable: " + why;
  return "";
}

int32_t resolve_mem_kind(int32_t mem_kind, const void* buffer) {
  switch (mem_kind) {
    case COLLX_MEM_HOST:
    case COLLX_MEM_CUDA: return mem_kind;
    case COLLX_MEM_AUTO:
      return buffer && cuda::pointer_kind(buffer) == COLLX_MEM_CUDA ? COLLX_MEM_CUDA : COLLX_MEM_HOST;
    default: return -1;
  }
}

Status take_device_block(int device, size_t bytes, void** out) {
  *out = block_cache().take(device, bytes);
  if (*out) return Status::Ok();
  return cuda::device_alloc(bytes, out);
}

void recycle_device_block(int device, size_t bytes, void* ptr, void* last_use) {
  if (!ptr) return;
  Status done = last_use ? cuda::event_wait(last_use, Deadline::after_ms(kFreeWaitMs), nullptr,
                                            "recycling a parallel-layer workspace block")
                         : Status::Ok();
  if (done.ok()) {
    block_cache().give(device, bytes, ptr);
  } else {
    cuda::device_free(ptr);  // its last user is stuck or broken: do not hand its memory to anyone
  }
}

DeviceMem::~DeviceMem() {
  if (!ptr_) return;
  // Kernels or copies queued on the stream may still use the memory.
  Status drained =
      cuda::stream_wait(stream_, Deadline::after_ms(kFreeWaitMs), nullptr, "freeing a parallel-layer device buffer");
  if (drained.ok()) {
    block_cache().give(device_, bytes_, ptr_);
  } else {
    cuda::device_free(ptr_);  // the stream is stuck or broken: do not hand its memory to anyone
  }
}

Status DeviceMem::allocate_zeroed(size_t bytes, void* stream) {
  stream_ = stream;
  if (bytes == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(cuda::current_device(&device_));
  bytes_ = bytes;
  COLLX_RETURN_IF_ERROR(take_device_block(device_, bytes, &ptr_));
  return cuda::memset_async(ptr_, 0, bytes, stream);
}

PinnedMem::~PinnedMem() {
  if (!ptr_) return;
  cuda::stream_wait(stream_, Deadline::after_ms(kFreeWaitMs), nullptr, "freeing a parallel-layer pinned buffer")
      .ignore();
  cuda::host_free_pinned(ptr_);
}

Status PinnedMem::allocate(size_t bytes, void* stream) {
  stream_ = stream;
  if (bytes == 0) return Status::Ok();
  return cuda::host_alloc_pinned(bytes, &ptr_);
}

collx_opts_t device_opts(void* stream) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = COLLX_MEM_CUDA;
  opts.stream = stream;
  return opts;
}

Status device_scale(float* p, size_t n, float scale, void* stream) {
  if (scale == 1.0f || n == 0) return Status::Ok();
  void* out[1] = {p};
  const void* in[1] = {p};
  // One input of PREMUL_SUM: p[i] * float(scale), exactly the host loop's product.
  return cuda::cuda_reduce_n(out, 1, in, 1, n, COLLX_FLOAT32, COLLX_PREMUL_SUM, scale, 1, stream);
}

Status device_add(float* dst, const float* src, size_t n, void* stream) {
  if (n == 0) return Status::Ok();
  return cuda::cuda_reduce(dst, dst, src, n, COLLX_FLOAT32, COLLX_SUM, stream);
}

Status device_zero(float* p, size_t n, void* stream) {
  if (n == 0) return Status::Ok();
  return cuda::memset_async(p, 0, n * sizeof(float), stream);
}

}  // namespace parallel
}  // namespace collx
