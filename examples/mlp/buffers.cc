// Host or device buffers of the example, through the public API only.
#include "examples/mlp/buffers.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "collx/collx.h"
#include "examples/mlp/param_store.h"

namespace mlp {
namespace {

bool g_device = false;
// The default stream: dp/ZeRO (config.stream NULL) and the parallel ops (the thread's
// default parallel stream) queue there too, so copies are ordered after their work.
void* const kStream = nullptr;

void device_check(collx_status_t st, const char* what) {
  check(st, what, [] { return collx_last_error(nullptr); });
}

// bytes from p (host or device memory as chosen) into host memory at out.
void read_bytes(void* out, const void* p, size_t bytes) {
  if (bytes == 0) return;
  if (!g_device) {
    std::memcpy(out, p, bytes);
    return;
  }
  device_check(collx_device_memcpy(out, p, bytes, kStream), "collx_device_memcpy");
  device_check(collx_device_stream_synchronize(kStream), "collx_device_stream_synchronize");
}

}  // namespace

void use_device_memory(bool device) { g_device = device; }
bool device_memory() { return g_device; }

std::vector<float> read(const float* p, size_t n) {
  std::vector<float> v(n);
  read_bytes(v.data(), p, n * sizeof(float));
  return v;
}

std::vector<float> read_bf16(const void* p, size_t n) {
  std::vector<uint16_t> bits(n);
  read_bytes(bits.data(), p, n * sizeof(uint16_t));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t wide = static_cast<uint32_t>(bits[i]) << 16;  // bfloat16 is float's top half
    std::memcpy(&v[i], &wide, sizeof wide);
  }
  return v;
}

void write(float* p, const std::vector<float>& v) {
  if (v.empty()) return;
  if (!g_device) {
    std::memcpy(p, v.data(), v.size() * sizeof(float));
    return;
  }
  device_check(collx_device_memcpy(p, v.data(), v.size() * sizeof(float), kStream), "collx_device_memcpy");
  // v may go as soon as this returns.
  device_check(collx_device_stream_synchronize(kStream), "collx_device_stream_synchronize");
}

Buffer::Buffer(size_t n) : Buffer(std::vector<float>(n, 0.0f)) {}

Buffer::Buffer(const std::vector<float>& v) : n_(v.size()), device_(g_device) {
  if (n_ == 0) return;
  if (device_) {
    void* p = nullptr;
    device_check(collx_device_alloc(n_ * sizeof(float), &p), "collx_device_alloc");
    p_ = static_cast<float*>(p);
  } else {
    p_ = static_cast<float*>(std::malloc(n_ * sizeof(float)));
    if (p_ == nullptr) throw Failure{COLLX_ERR_NO_MEMORY, "out of host memory"};
  }
  write(v);
}

Buffer::~Buffer() {
  if (device_)
    collx_device_free(p_);
  else
    std::free(p_);
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  std::swap(device_, o.device_);
  return *this;
}

}  // namespace mlp
