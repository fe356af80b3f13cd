// CUDA IPC direct collectives (see ipc_coll.h).
#include "backends/cuda_ipc/ipc_coll.h"

#include <algorithm>
#include <cstring>

#include "lib/common/process_identity.h"
#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace cuda_ipc {

namespace {

constexpr size_t kMaxMappings = 64;

// What a rank tells its peers about one buffer.
struct Record {
  ProcessIdentity process;  // pid and nonce: equal pids in two containers are two processes
  uint64_t ptr;      // the buffer as its owner sees it (used by ranks of the same process)
  uint64_t offset;   // from the allocation's base
  uint8_t handle[cuda::kIpcHandleBytes];
  uint8_t device[16];  // UUID of the GPU holding the buffer (zeros: unknown)
  uint8_t present;   // 0: NULL buffer (count 0)
  uint8_t shareable; // 0: no IPC handle (not a cudaMalloc allocation)
};

// The UUID of the device holding `buf` (zeros when it cannot be told).
void device_of(const void* buf, uint8_t uuid[16]) {
  int device = -1;
  if (!cuda::pointer_device(buf, &device).ok() || !cuda::device_uuid(device, uuid).ok()) std::memset(uuid, 0, 16);
}

// Elements [lo, hi) of slice `part` of `count` split in `parts` nearly equal slices.
void slice(size_t count, int parts, int part, size_t* lo, size_t* hi) {
  const size_t base = count / static_cast<size_t>(parts), extra = count % static_cast<size_t>(parts);
  const size_t p = static_cast<size_t>(part);
  *lo = p * base + (p < extra ? p : extra);
  *hi = *lo + base + (p < extra ? 1 : 0);
}

Status barrier(transport::Bootstrap* bootstrap, const char* name, Deadline deadline) {
  std::vector<std::vector<uint8_t>> all;
  return bootstrap->allgather(name, {}, &all, deadline);
}

}  // namespace

bool supports(collx_coll_t coll, int size) {
  return size >= 1 && size <= cuda::kMaxReduceInputs &&
         (coll == COLLX_COLL_ALLREDUCE || coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_ALLGATHER);
}

Peers::~Peers() {
  for (const Mapping& m : mappings_) cuda::ipc_close(m.base).ignore();
}

Status Peers::map(int peer, const uint8_t* handle, void** base) {
  std::string key(reinterpret_cast<const char*>(handle), cuda::kIpcHandleBytes);
  for (const Mapping& m : mappings_) {
    if (m.handle == key) {
      *base = m.base;
      return Status::Ok();
    }
  }
  cuda::IpcHandle h;
  std::memcpy(h.bytes, handle, cuda::kIpcHandleBytes);
  Status st = cuda::ipc_open(h, base);
  if (!st.ok()) return st.with_context(string_printf("mapping rank %d's device buffer: ", peer));
  if (mappings_.size() >= kMaxMappings) {
    cuda::ipc_close(mappings_.front().base).ignore();
    mappings_.erase(mappings_.begin());
  }
  mappings_.push_back(Mapping{key, *base});
  return Status::Ok();
}

Status Peers::exchange(transport::Bootstrap* bootstrap, const char* name, const void* buf, std::vector<char*>* ptrs,
                       Deadline deadline) {
  Record mine;
  std::memset(&mine, 0, sizeof mine);
  mine.process = this_process();
  mine.ptr = reinterpret_cast<uintptr_t>(buf);
  if (buf) {
    cuda::IpcHandle h;
    uintptr_t base = 0;
    size_t offset = 0;
    mine.present = 1;
    device_of(buf, mine.device);
    if (cuda::ipc_get_handle(buf, &h, &base, &offset).ok()) {
      std::memcpy(mine.handle, h.bytes, sizeof mine.handle);
      mine.offset = offset;
      mine.shareable = 1;
    }
  }
  std::vector<uint8_t> bytes(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  std::vector<std::vector<uint8_t>> all;
  COLLX_RETURN_IF_ERROR(bootstrap->allgather(name, bytes, &all, deadline));
  ptrs->assign(static_cast<size_t>(size_), nullptr);
  std::vector<Record> recs(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const auto& b = all[static_cast<size_t>(r)];
    if (b.size() != sizeof(Record)) {
      return make_status(COLLX_ERR_PROTOCOL, "CUDA IPC: rank %d sent %zu bytes for '%s', expected %zu", r, b.size(),
                         name, sizeof(Record));
    }
    std::memcpy(&recs[static_cast<size_t>(r)], b.data(), sizeof(Record));
  }
  // Every rank decides alike from the same records: a buffer without a handle is fine only
  // when every rank is in its owner's process.
  for (const Record& r : recs) {
    if (!r.present || r.shareable) continue;
    for (const Record& q : recs) {
      if (!same_process(q.process, r.process)) {
        return make_status(COLLX_ERR_UNSUPPORTED, "a rank's '%s' buffer has no CUDA IPC handle (not from cudaMalloc)",
                           name);
      }
    }
  }
  std::string devices;  // every rank's device, in rank order: the key of the peer-access verdict
  for (const Record& r : recs) devices.append(reinterpret_cast<const char*>(r.device), sizeof r.device);
  COLLX_RETURN_IF_ERROR(check_peer_access(bootstrap, devices, mine.device, deadline));
  for (int r = 0; r < size_; ++r) {
    const Record& rec = recs[static_cast<size_t>(r)];
    if (!rec.present) continue;
    if (same_process(rec.process, mine.process)) {
      (*ptrs)[static_cast<size_t>(r)] = reinterpret_cast<char*>(static_cast<uintptr_t>(rec.ptr));
      continue;
    }
    void* base = nullptr;
    COLLX_RETURN_IF_ERROR(map(r, rec.handle, &base));
    (*ptrs)[static_cast<size_t>(r)] = static_cast<char*>(base) + rec.offset;
  }
  return Status::Ok();
}

Status Peers::local_peer_access(const std::string& devices, const uint8_t* mine, std::string* why) {
  if (local_devices_.empty()) {
    const int n = cuda::device_count();
    for (int i = 0; i < n; ++i) {
      uint8_t uuid[16] = {0};
      if (!cuda::device_uuid(i, uuid).ok()) std::memset(uuid, 0, sizeof uuid);
      local_devices_.emplace_back(reinterpret_cast<const char*>(uuid), sizeof uuid);
    }
  }
  auto ordinal = [&](const std::string& uuid) {
    for (size_t i = 0; i < local_devices_.size(); ++i) {
      if (local_devices_[i] == uuid) return static_cast<int>(i);
    }
    return -1;
  };
  const std::string unknown(16, '\0'), own(reinterpret_cast<const char*>(mine), 16);
  const int me = ordinal(own);
  for (int r = 0; r < size_; ++r) {
    const std::string peer = devices.substr(static_cast<size_t>(r) * 16, 16);
    if (peer == unknown || peer == own || own == unknown) continue;  // no buffer, or the same GPU
    const int other = ordinal(peer);
    bool can = false;
    if (me >= 0 && other >= 0) cuda::device_can_access_peer(me, other, &can).ignore();
    if (!can) {
      *why = string_printf("rank %d's device %d cannot access rank %d's GPU (%s)", rank_, me, r,
                           other < 0 ? "not visible to this process" : "cudaDeviceCanAccessPeer says no");
      return Status::Ok();
    }
    Status st = cuda::device_enable_peer_access(other);
    if (!st.ok()) {
      *why = string_printf("rank %d cannot enable peer access from device %d to %d: %s", rank_, me, other,
                           st.message().c_str());
      return Status::Ok();
    }
  }
  why->clear();
  return Status::Ok();
}

Status Peers::check_peer_access(transport::Bootstrap* bootstrap, const std::string& devices, const uint8_t* mine,
                                Deadline deadline) {
  // Every rank holds the same records, hence the same key and the same cache: all of them
  // either find the verdict or exchange it here, alike.
  auto known = verdicts_.find(devices);
  if (known == verdicts_.end()) {
    std::string why;
    COLLX_RETURN_IF_ERROR(local_peer_access(devices, mine, &why));
    // Each rank's answer (empty: yes; else why not), fixed size so the exchange can carry it.
    std::vector<uint8_t> answer(kVerdictBytes, 0);
    std::memcpy(answer.data(), why.data(), std::min(why.size(), kVerdictBytes - 1));
    std::vector<std::vector<uint8_t>> all;
    COLLX_RETURN_IF_ERROR(bootstrap->allgather("peer access", answer, &all, deadline));
    std::string verdict;
    for (const auto& a : all) {
      if (a.size() == kVerdictBytes && a[0] != 0) {
        verdict = std::string(reinterpret_cast<const char*>(a.data()));
        break;
      }
    }
    if (verdicts_.size() >= kMaxMappings) verdicts_.clear();  // alike on every rank
    known = verdicts_.emplace(devices, verdict).first;
  }
  if (known->second.empty()) return Status::Ok();
  return make_status(COLLX_ERR_UNSUPPORTED, "CUDA IPC needs peer access between the ranks' GPUs: %s",
                     known->second.c_str());
}

Status Peers::run(const Call& c, transport::Bootstrap* bootstrap, Deadline deadline, const std::atomic<bool>* abort) {
  if (!supports(c.coll, size_)) {
    return make_status(COLLX_ERR_UNSUPPORTED, "CUDA IPC has no direct schedule for this collective on %d ranks", size_);
  }
  const size_t element = datatype_size(c.datatype);
  COLLX_RETURN_IF_ERROR(cuda::stream_wait(c.stream, deadline, abort, "the caller's stream before a CUDA IPC collective"));
  std::vector<char*> sends, recvs;
  COLLX_RETURN_IF_ERROR(exchange(bootstrap, "send", c.sendbuf, &sends, deadline));
  if (c.coll == COLLX_COLL_ALLREDUCE) COLLX_RETURN_IF_ERROR(exchange(bootstrap, "recv", c.recvbuf, &recvs, deadline));
  char* const recv = static_cast<char*>(c.recvbuf);
  const std::atomic<bool>* const ab = abort;

  if (c.coll == COLLX_COLL_ALLGATHER) {
    const size_t bytes = c.count * element;
    for (int j = 0; j < size_; ++j) {
      char* dst = recv + static_cast<size_t>(j) * bytes;
      if (sends[static_cast<size_t>(j)] != dst) {
        COLLX_RETURN_IF_ERROR(cuda::copy_async(dst, sends[static_cast<size_t>(j)], bytes, cuda::CopyKind::kDeviceToDevice, c.stream));
      }
    }
  } else {
    // This rank's slice of every rank's input, reduced once and written to every output that
    // holds it: all-reduce pushes slice `rank` into every rank's recvbuf (no gather phase,
    // each byte read once and written once); reduce-scatter writes block `rank` here only.
    size_t lo = 0, hi = c.count;
    size_t in_offset = static_cast<size_t>(rank_) * c.count;
    std::vector<void*> outputs{recv};
    if (c.coll == COLLX_COLL_ALLREDUCE) {
      slice(c.count, size_, rank_, &lo, &hi);
      in_offset = lo;
      outputs.clear();
      for (int j = 0; j < size_; ++j) outputs.push_back(recvs[static_cast<size_t>(j)] + lo * element);
    }
    const void* inputs[cuda::kMaxReduceInputs];
    for (int j = 0; j < size_; ++j) inputs[j] = sends[static_cast<size_t>(j)] + in_offset * element;
    COLLX_RETURN_IF_ERROR(cuda::cuda_reduce_n(outputs.data(), static_cast<int>(outputs.size()), inputs, size_, hi - lo,
                                              c.datatype, c.op, c.premul_scalar, size_, c.stream));
  }
  COLLX_RETURN_IF_ERROR(cuda::stream_wait(c.stream, deadline, ab, "the CUDA IPC kernel and copies"));
  return barrier(bootstrap, "done", deadline);
}

}  // namespace cuda_ipc
}  // namespace collx
