#include "tests/gpu/gpu_test_util.h"

#include <cstring>

#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace testing {

std::vector<uint8_t> exact_data(collx_datatype_t datatype, size_t count, int rank, unsigned salt) {
  const size_t element = datatype_size(datatype);
  std::vector<uint8_t> out(count * element);
  const bool is_unsigned = datatype == COLLX_UINT8 || datatype == COLLX_UINT32 || datatype == COLLX_UINT64;
  for (size_t i = 0; i < count; ++i) {
    int64_t v = static_cast<int64_t>((i * 7 + static_cast<size_t>(rank) * 3 + salt) % 7);
    if (!is_unsigned) v -= 3;
    uint8_t* p = out.data() + i * element;
    switch (datatype) {
      case COLLX_INT8: case COLLX_UINT8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); break; }
      case COLLX_INT32: case COLLX_UINT32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case COLLX_INT64: case COLLX_UINT64: std::memcpy(p, &v, 8); break;
      case COLLX_FLOAT16: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case COLLX_BFLOAT16: { uint16_t h = float_to_bfloat16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case COLLX_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case COLLX_FLOAT64: { double d = static_cast<double>(v); std::memcpy(p, &d, 8); break; }
      default: break;
    }
  }
  return out;
}

DeviceBuffer::DeviceBuffer(size_t bytes, const void* init) : bytes_(bytes) {
  void* p = nullptr;
  if (!cuda::device_alloc(bytes, &p).ok()) return;
  ptr_ = static_cast<char*>(p);
  if (init && bytes) {
    if (!cuda::copy(ptr_, init, bytes, cuda::CopyKind::kHostToDevice).ok()) {
      cuda::device_free(ptr_);
      ptr_ = nullptr;
    }
  }
}

DeviceBuffer::~DeviceBuffer() { cuda::device_free(ptr_); }

std::vector<uint8_t> DeviceBuffer::read(size_t offset, size_t bytes) const {
  std::vector<uint8_t> out(bytes);
  if (!cuda::copy(out.data(), ptr_ + offset, bytes, cuda::CopyKind::kDeviceToHost).ok()) out.clear();
  return out;
}

}  // namespace testing
}  // namespace collx
