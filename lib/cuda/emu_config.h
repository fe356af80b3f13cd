// Settings and device identity of the emulated device: whether it is active, how many
// devices, the calling thread's current device, the per-operation delay.
#pragma once

#include <cstdint>

namespace collx {
namespace cuda {
namespace emu {

struct Config {
  bool active = false;
  int devices = 1;          // COLLX_TEST_DEVICE_COUNT
  int64_t delay_us = 0;     // COLLX_TEST_DEVICE_DELAY_US
  bool peer_access = true;  // COLLX_TEST_DEVICE_PEER_ACCESS: devices reach one another
};
// Read once per process.
const Config& config();
// The calling thread's current device (set_device), 0 until set.
int current_index();
// How many times pointer_kind() has run in this process: the probe of a call with
// COLLX_MEM_AUTO, which the core makes once per call (lib/core/memory_kind_probed_once_test.cc).
uint64_t pointer_kind_probes();

}  // namespace emu
}  // namespace cuda
}  // namespace collx
