// collx_mem_alloc / collx_mem_free: zero-copy host buffers (memory files peers can map).
#include "lib/api/handles.h"
#include "transports/shm/shm_memory.h"

extern "C" {

collx_status_t collx_mem_alloc(size_t bytes, void** ptr) {
  return collx::api::guarded(nullptr, [&] { return collx::shm::allocate_shared_memory(bytes, ptr, nullptr); });
}

collx_status_t collx_mem_free(void* ptr) {
  return collx::api::guarded(nullptr, [&] { return collx::shm::free_shared_memory(ptr); });
}

}  // extern "C"
