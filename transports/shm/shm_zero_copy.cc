// The shm engine's zero-copy reads (SharedBoards::describe_buffer / map_peer): a peer's
// buffer from collx_mem_alloc is mapped here once and read in place, no system call per read.
#include <errno.h>

#include <cstring>

#include "lib/common/log.h"
#include "transports/shm/shm_engine.h"
#include "transports/shm/shm_huge_pages.h"

namespace collx {
namespace shm {

namespace {
// Mappings kept per peer. A mapping keeps the peer's pages alive after the peer frees them,
// so the cache stays small; callers that cycle through more buffers than this remap.
constexpr size_t kMaxMapsPerPeer = 8;
}  // namespace

transport::SharedBoards::BufferNote ShmEngine::describe_buffer(const void* p, size_t bytes) const {
  BufferNote note;
  note.address = reinterpret_cast<uintptr_t>(p);
  const SharedRegion region = find_shared_region(p, bytes);
  note.region_id = region.id;
  note.region_base = region.base;
  note.region_bytes = region.bytes;
  note.region_fd = region.fd;
  // Ordinary memory: peers will read it through the kernel, which walks its pages one by one.
  // Reused buffers get huge pages (shm_huge_pages.h).
  if (region.id == 0 && peer_reads_) {
    if (HugePageCache* cache = process_huge_pages()) cache->offer(p, bytes);
  }
  return note;
}

const uint8_t* ShmEngine::map_peer(int peer, const BufferNote& note, uint64_t remote, size_t bytes) {
  if (note.region_id == 0 || peer < 0 || peer >= size_ || peer == rank_ || !peer_reads_) return nullptr;
  Peer& p = *peers_[peer];
  // As read_peer: a peer that failed or aborted may have let its caller reuse the buffer.
  if (static_cast<RankState>(p.seg.header()->state.load(std::memory_order_acquire)) != RankState::kAlive) {
    return nullptr;  // read_peer reports it
  }
  SharedRegion region;
  region.id = note.region_id;
  region.base = note.region_base;
  region.bytes = note.region_bytes;
  region.fd = note.region_fd;
  std::lock_guard<std::mutex> lock(maps_mu_);
  for (const MappedRegion& m : p.maps) {
    const SharedRegion& r = m.region();
    if (r.id == region.id && r.base == region.base && r.bytes == region.bytes) {
      return m.holds(remote, bytes) ? m.at(remote) : nullptr;
    }
  }
  if (p.maps_refused) return nullptr;
  MappedRegion mapping;
  int error = 0;
  if (!mapping.map(p.pid, region, &error)) {
    if (error == EACCES || error == EPERM) {
      p.maps_refused = true;
      COLLX_INFO(kNet, "rank %d: cannot map rank %d's zero-copy buffers (%s); reading them with copies", rank_, peer,
                 std::strerror(error));
    }
    return nullptr;
  }
  if (!mapping.holds(remote, bytes)) return nullptr;
  const uint8_t* at = mapping.at(remote);
  if (p.maps.size() < kMaxMapsPerPeer) {
    p.maps.push_back(std::move(mapping));
  } else {
    p.maps[p.next_map_victim] = std::move(mapping);
    p.next_map_victim = (p.next_map_victim + 1) % kMaxMapsPerPeer;
  }
  return at;
}

}  // namespace shm
}  // namespace collx
