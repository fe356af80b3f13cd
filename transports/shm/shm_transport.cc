// create_shm_transport: segment creation, name exchange, mapping, early unlink.
#include "transports/shm/shm_transport.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "transports/shm/shm_engine.h"
#include "transports/shm/shm_segment.h"

namespace collx {

namespace {

constexpr size_t kMaxNameBytes = 255;

// Blob: int32 pid, then the segment name.
std::vector<uint8_t> encode_blob(pid_t pid, const std::string& name) {
  std::vector<uint8_t> blob(sizeof(int32_t) + name.size());
  int32_t p = static_cast<int32_t>(pid);
  std::memcpy(blob.data(), &p, sizeof p);
  std::memcpy(blob.data() + sizeof p, name.data(), name.size());
  return blob;
}

bool decode_blob(const std::vector<uint8_t>& blob, pid_t* pid, std::string* name) {
  if (blob.size() <= sizeof(int32_t) || blob.size() > sizeof(int32_t) + kMaxNameBytes) return false;
  int32_t p;
  std::memcpy(&p, blob.data(), sizeof p);
  if (p <= 0) return false;
  *pid = p;
  name->assign(reinterpret_cast<const char*>(blob.data()) + sizeof p, blob.size() - sizeof p);
  if (name->compare(0, 7, "/collx-") != 0 || name->find('/', 1) != std::string::npos ||
      name->find('\0') != std::string::npos) {
    return false;
  }
  return true;
}

}  // namespace

Status create_shm_transport(const ShmTransportParams& in, std::unique_ptr<transport::Transport>* out) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "shm transport: null output");
  if (in.bootstrap == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "shm transport: no bootstrap");
  if (in.size < 1 || in.size > shm::kMaxRanks || in.rank < 0 || in.rank >= in.size) {
    return make_status(COLLX_ERR_INVALID_ARG, "shm transport: rank %d of %d out of range (at most %d ranks)", in.rank,
                       in.size, shm::kMaxRanks);
  }
  ShmTransportParams params = in;
  bool no_cma = false;
  COLLX_RETURN_IF_ERROR(setting_bool(SettingId::SHM_NO_CMA, &no_cma));
  if (no_cma) params.force_ring_copy = true;
  const pid_t pid = ::getpid();
  auto own = std::make_unique<shm::Segment>();
  std::string name;
  COLLX_RETURN_IF_ERROR(shm::make_segment_name(params.comm_id, params.rank, pid, &name));
  COLLX_RETURN_IF_ERROR(own->create(name, params.comm_id, params.rank, params.size));
  // From here the engine owns the segment: any failure below unlinks it (Segment's
  // destructor) and marks this rank aborted for the peers that already mapped it.
  auto engine = std::make_unique<shm::ShmEngine>(params, std::move(own));

  std::vector<std::vector<uint8_t>> blobs;
  COLLX_RETURN_IF_ERROR(params.bootstrap->allgather(params.bootstrap_name + ".segments", encode_blob(pid, name), &blobs,
                                                    params.deadline));
  if (blobs.size() != static_cast<size_t>(params.size)) {
    return make_status(COLLX_ERR_PROTOCOL, "shm transport: bootstrap returned %zu blobs for %d ranks", blobs.size(),
                       params.size);
  }
  std::vector<std::string> names(params.size);
  std::vector<pid_t> pids(params.size);
  for (int r = 0; r < params.size; ++r) {
    if (!decode_blob(blobs[r], &pids[r], &names[r])) {
      return make_status(COLLX_ERR_PROTOCOL, "shm transport: malformed segment address from rank %d", r);
    }
  }
  COLLX_RETURN_IF_ERROR(engine->attach(names, pids));
  // Once everyone has mapped every segment, the names can go: nothing is left in /dev/shm
  // however the job ends from here on.
  // The same allgather says whether this rank can read every peer's memory in place
  // (cross-memory attach): collectives read peers' buffers directly only when all can.
  const uint8_t reads = engine->probe_peer_reads() ? 1 : 0;
  COLLX_RETURN_IF_ERROR(params.bootstrap->allgather(params.bootstrap_name + ".mapped", std::vector<uint8_t>{reads},
                                                    &blobs, params.deadline));
  bool all_read = true;
  for (const auto& blob : blobs) all_read = all_read && blob.size() == 1 && blob[0] == 1;
  engine->set_peer_reads(all_read);
  engine->own_segment().unlink();
  // Every rank unlinks every name (ENOENT is fine): when create returns on any rank, no
  // segment of this communicator is left in /dev/shm, not only its own.
  for (const std::string& n : names) ::shm_unlink(n.c_str());
  COLLX_INFO(NET, "rank %d: shm transport up (%d ranks, segment %zu bytes)", params.rank, params.size,
             shm::segment_bytes(params.size));
  *out = std::move(engine);
  return Status::Ok();
}

}  // namespace collx
