// Where the example keeps what collx touches: host memory, or device memory with --device
// (collx_device_* from collx.h; the example has no GPU kernels, so its own math reads device
// data into host scratch and writes results back, each copy waited for).
#pragma once

#include <cstddef>
#include <vector>

namespace mlp {

// Chooses the memory of every Buffer and of read/write below; set once, before training.
void use_device_memory(bool device);
bool device_memory();

// n floats at p (host or device memory as chosen), copied to the host.
std::vector<float> read(const float* p, size_t n);
// Copies v to p (v.size() floats).
void write(float* p, const std::vector<float>& v);
// n bfloat16 values at p (a 16-bit parameter view), widened to float on the host.
std::vector<float> read_bf16(const void* p, size_t n);

// An owned float buffer in the chosen memory (move-only).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n);                  // zero-filled
  explicit Buffer(const std::vector<float>& v);  // a copy of v
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() { return p_; }
  size_t size() const { return n_; }
  std::vector<float> read() const { return mlp::read(p_, n_); }
  void write(const std::vector<float>& v) { mlp::write(p_, v); }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
  bool device_ = false;
};

}  // namespace mlp
