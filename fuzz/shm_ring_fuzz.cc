// libFuzzer target for the shared-memory ring index checks (transports/shm/shm_ring.h): the
// head and tail of a ring live in memory the peer process can scribble on, so RingView must
// notice impossible indices and never hand out a cell outside the ring. The input is a ring
// size and a script: each step either overwrites head or tail with input bytes (the hostile
// peer) or produces / consumes a cell (the two honest ends).
//
// The cell contents are checked inside ShmEngine (shm_engine.cc), which needs a live engine
// and its segments; that check is not isolated from the engine and is not fuzzed here.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transports/shm/shm_ring.h"

using namespace collx::shm;

namespace {

uint64_t take_u64(const uint8_t*& data, size_t& size) {
  uint64_t value = 0;
  const size_t n = size < 8 ? size : 8;
  std::memcpy(&value, data, n);
  data += n;
  size -= n;
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint32_t ncells = 1 + data[0] % 16;
  ++data;
  --size;
  static std::vector<uint8_t> cells(16 * size_t{kCellBytes});
  RingHeader header;
  header.head.store(0);
  header.tail.store(0);
  header.producer_waiting.store(0);
  RingView ring(&header, cells.data(), ncells);
  const uint8_t* begin = cells.data();
  const uint8_t* end = begin + ncells * size_t{kCellBytes};
  auto check_slot = [&](const uint8_t* slot) {
    if (slot == nullptr) return;
    if (slot < begin || slot >= end || (slot - begin) % kCellBytes != 0) std::abort();
  };
  while (size > 0) {
    const uint8_t op = data[0];
    ++data;
    --size;
    bool corrupt = false;
    const uint64_t used = header.tail.load() - header.head.load();
    switch (op % 4) {
      case 0: header.head.store(take_u64(data, size)); break;
      case 1: header.tail.store(take_u64(data, size)); break;
      case 2: {
        uint8_t* slot = ring.producer_slot(&corrupt);
        check_slot(slot);
        if (corrupt != (used > ncells)) std::abort();
        if (slot != nullptr) ring.produce();
        break;
      }
      case 3: {
        const uint8_t* slot = ring.consumer_slot(&corrupt);
        check_slot(slot);
        if (corrupt != (used > ncells)) std::abort();
        if (slot != nullptr) ring.consume();
        break;
      }
    }
  }
  return 0;
}
