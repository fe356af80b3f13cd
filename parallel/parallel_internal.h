// Internals of the parallel layer (grid and layout). Uses only the public C API.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "lib/common/thread_error.h"

struct collx_grid_s;

namespace collx {
namespace parallel {

// 64-bit FNV-1a, fed field by field (little-endian bytes of fixed-width integers).
class Fnv64 {
 public:
  void bytes(const void* p, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= c[i];
      h_ *= 1099511628211ull;
    }
  }
  void u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(b, 8);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// The calling thread's last error message, the one collx_last_error(NULL) returns: every
// failed call of this layer records its message there (docs/api-conventions.md).
inline std::string& thread_error() { return collx::thread_error_message(); }
// Stores msg as the layout's last error (when layout is not NULL) and returns st.
collx_status_t layout_fail(collx_layout_t layout, collx_status_t st, const std::string& msg);

// A handle's message, guarded by a mutex (handles queried from several threads). Setting it
// records the message with the calling thread too, so that a call on a handle obeys the same
// rule as every other call.
class ErrorSlot {
 public:
  void set(const std::string& m) {
    if (&m != &thread_error()) thread_error() = m;
    std::lock_guard<std::mutex> lock(mu_);
    msg_ = m;
  }
  const char* get() {
    std::lock_guard<std::mutex> lock(mu_);
    return msg_.c_str();
  }

 private:
  std::mutex mu_;
  std::string msg_;
};

// A refused argument of call `fn` (COLLX_ERR_INVALID_ARG): "fn: what" goes to the handle the
// call is on when there is one (it then reaches the thread through ErrorSlot), else to the
// thread only. Every entry point reports its refusals here rather than returning a bare code.
template <typename Handle>
collx_status_t refuse_arg(Handle handle, const std::string& fn, const std::string& what) {
  const std::string m = fn + ": " + what;
  if constexpr (std::is_null_pointer_v<Handle>) {
    thread_error() = m;
  } else if (handle) {
    handle->error.set(m);
  } else {
    thread_error() = m;
  }
  return COLLX_ERR_INVALID_ARG;
}

// Runs fn() at the C boundary: exceptions become status codes with a message via on_error.
template <typename Fn, typename OnError>
collx_status_t guarded(Fn&& fn, OnError&& on_error) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    on_error(std::string("out of memory"));
    return COLLX_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    on_error(std::string("internal error: ") + e.what());
    return COLLX_ERR_INTERNAL;
  } catch (...) {
    on_error(std::string("internal error: unknown exception"));
    return COLLX_ERR_INTERNAL;
  }
}

// coords[d] = (rank / stride[d]) % dims[d] for every axis.
void mixed_radix_coords(const int32_t dims[COLLX_GRID_NUM_DIMS], const int32_t stride[COLLX_GRID_NUM_DIMS],
                        int32_t rank, int32_t coords[COLLX_GRID_NUM_DIMS]);
// The expert layout of a grid (grid_expert.cc), once dims, stride and the world size are
// set: fills edims = {tp, 1, ep, cp*dp/ep, pp} and whether ep varies faster than edp (the
// order of the "ep" and "dp" tokens). Returns "" or why the sizes break Megatron's rule.
// Why a float32-only accessor (`call`, e.g. collx_dp_grad_ptr) refuses a handle whose `what`
// (e.g. "gradient views") are 16-bit per config.`field`: names the type and the _view call to
// use instead; "" when `dtype` is float32. Shared by the dp and ZeRO accessors.
std::string float32_only_refusal(const char* call, const char* what, const char* field, int32_t dtype,
                                 const char* view_call);

std::string plan_expert_layout(collx_grid_s* g, const int perm[COLLX_GRID_NUM_DIMS]);
// Expert coordinates {tp, 0, ep, edp, pp} of a world rank: tp and pp are the dense ones,
// the rank's index f in its DP|CP group (ordered by world rank) is ep + edp*EP when ep
// comes first in the order, edp + ep*EDP otherwise. expert_rank is the inverse.
void expert_coords(const collx_grid_s* g, int32_t rank, int32_t out[COLLX_GRID_NUM_DIMS]);
int32_t expert_rank(const collx_grid_s* g, const int32_t ecoords[COLLX_GRID_NUM_DIMS]);

}  // namespace parallel
}  // namespace collx

struct collx_grid_s {
  collx_comm_t world = nullptr;
  int32_t world_size = 0;
  int32_t rank = 0;
  int32_t dims[COLLX_GRID_NUM_DIMS] = {1, 1, 1, 1, 1};
  int32_t stride[COLLX_GRID_NUM_DIMS] = {1, 1, 1, 1, 1};   // dense layout (ep counts as 1)
  int32_t edims[COLLX_GRID_NUM_DIMS] = {1, 1, 1, 1, 1};    // expert layout: tp, 1, ep, edp, pp
  bool ep_fast = true;                                      // ep varies faster than edp
  std::string order;                                   // canonical, all five tokens
  std::vector<std::pair<uint32_t, collx_comm_t>> comms;  // (axes, comm) in creation order
  collx::parallel::ErrorSlot error;
};

struct collx_layout_s {
  struct Tensor {
    uint64_t id = 0;
    size_t numel = 0;
    int32_t dtype = 0;
    uint32_t flags = 0;
    // Computed by finalize.
    size_t offset = 0;
    size_t padded = 0;  // space taken in the buffer (numel, or ceil(numel/dp)*dp)
    size_t bucket = 0;
  };
  struct Bucket {
    size_t start = 0;
    size_t numel = 0;
    size_t padded = 0;
  };
  collx_layout_config_t config{};
  size_t align = 1;  // effective alignment (>= 1)
  size_t pad = 1;    // effective bucket pad (>= 1)
  bool finalized = false;
  std::vector<Tensor> tensors;  // registration order
  std::unordered_map<uint64_t, size_t> index;  // id -> position in tensors
  std::vector<Bucket> buckets;
  size_t total = 0;
  collx::parallel::ErrorSlot error;
};
