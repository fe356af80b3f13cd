// CUDA IPC direct collectives (see ipc_coll.h).
#include "transports/cuda_ipc/ipc_coll.h"

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
  uint8_t present;   // 0: NULL buffer (count 0)
  uint8_t shareable; // 0: no IPC handle (not a cudaMalloc allocation)
};

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
