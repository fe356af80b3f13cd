// Device-buffer collectives: the route choice and the staged route (see comm_device.h).
#include "lib/core/comm_device.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "lib/common/log.h"
#include "lib/core/staging_plan.h"
#include "lib/core/names.h"
#include "lib/core/store_bootstrap.h"
#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"

namespace collx {

// Staging chunk of the element-wise collectives (two are in flight).
constexpr size_t kStagingChunkBytes = 8u << 20;

// Per-communicator device state, created by the first device-buffer collective. Used by one
// collective at a time (the communicator runs them in order).
class DeviceState {
 public:
  ~DeviceState() {
    for (void* e : chunk_events) {
      if (!e) continue;
      cuda::event_wait(e, Deadline::after_ms(10000), nullptr, "a staged copy").ignore();
      cuda::event_destroy(e);
    }
    if (staging_event) {
      // The last copy out of the staging buffer must end before the buffer is freed.
      cuda::event_wait(staging_event, Deadline::after_ms(10000), nullptr, "the last staged copy").ignore();
      cuda::event_destroy(staging_event);
    }
    cuda::host_free_pinned(pinned);
    for (auto& s : side_streams) cuda::stream_destroy(s.second);  // runs what is queued first
  }

  // Pinned staging of at least `bytes`, free of earlier copies.
  Status staging(size_t bytes, Deadline deadline, const std::atomic<bool>* abort, char** out) {
    if (staging_event) {
      COLLX_RETURN_IF_ERROR(cuda::event_wait(staging_event, deadline, abort, "the previous staged copy to the device"));
    } else {
      COLLX_RETURN_IF_ERROR(cuda::event_create(&staging_event));
    }
    if (bytes > pinned_bytes) {
      cuda::host_free_pinned(pinned);
      pinned = nullptr;
      pinned_bytes = 0;
      size_t want = bytes < (1u << 20) ? (1u << 20) : bytes + bytes / 4;
      COLLX_RETURN_IF_ERROR(cuda::host_alloc_pinned(want, &pinned));
      pinned_bytes = want;
    }
    *out = static_cast<char*>(pinned);
    return Status::Ok();
  }

  void* pinned = nullptr;
  size_t pinned_bytes = 0;
  void* staging_event = nullptr;  // recorded after the copy back to the device
  void* chunk_events[2] = {nullptr, nullptr};  // a chunk's input is in its slot
  std::unique_ptr<backend::Backend> nccl;
  bool nccl_refused = false;      // NCCL set-up said no on every rank: never tried again
  std::unique_ptr<backend::Backend> ipc;  // CUDA IPC, made by its first call
  std::map<int, void*> side_streams;  // device -> the executor's stream (Communicator::side_stream)
};

Status device_check(const CollCall& call) {
  if (call.mem_kind < COLLX_MEM_AUTO || call.mem_kind > COLLX_MEM_CUDA) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s: unknown mem_kind %d in opts", coll_name(call.coll), call.mem_kind);
  }
  // Buffers of COLLX_MEM_AUTO are probed once, after validation (resolve_mem_kind): a probe
  // without a CUDA driver is a failed dlopen search, milliseconds per call on a loaded machine.
  if (call.mem_kind != COLLX_MEM_CUDA) return Status::Ok();
  if (!cuda::built_with_cuda()) {
    return make_status(COLLX_ERR_UNSUPPORTED, "%s: CUDA device buffers are not supported by this build",
                       coll_name(call.coll));
  }
  std::string why;
  if (cuda::device_count(&why) == 0) {
    return make_status(COLLX_ERR_UNSUPPORTED, "opts->mem_kind is COLLX_MEM_CUDA but no CUDA device is usable: %s",
                       why.c_str());
  }
  return Status::Ok();  // the host checks (ranks, counts, overlap) hold for device buffers as they are
}

bool device_buffers(const CollCall& call) {
  if (call.coll == COLLX_COLL_BARRIER) return false;
  // A v-collective's own count may be 0 while the rank still receives (a gatherv root) or
  // sends (a scatterv root) others' blocks; only its staged route runs them, which needs no
  // agreement between ranks, so each rank decides by its own buffers.
  auto any = [](const std::vector<size_t>& counts) {
    return std::any_of(counts.begin(), counts.end(), [](size_t c) { return c > 0; });
  };
  if (call.count == 0 && !(coll_is_v(call.coll) && (any(call.counts) || any(call.send_counts)))) return false;
  if (call.mem_kind != COLLX_MEM_AUTO) return call.mem_kind == COLLX_MEM_CUDA;
  // The buffer every rank passes: a gatherv's sendbuf (its recvbuf matters at the root only,
  // and may be anything elsewhere), else recvbuf (a scatterv's sendbuf is the root's only).
  const void* p = call.recvbuf ? call.recvbuf : call.sendbuf;
  if (call.coll == COLLX_COLL_GATHERV && call.sendbuf) p = call.sendbuf;
  return cuda::pointer_kind(p) == COLLX_MEM_CUDA;
}

void resolve_mem_kind(CollCall* call) {
  if (call->mem_kind == COLLX_MEM_AUTO) call->mem_kind = device_buffers(*call) ? COLLX_MEM_CUDA : COLLX_MEM_HOST;
}

namespace {

// transport::Bootstrap over the communicator's own transport, for CUDA IPC's per-call
// exchanges (a store round trip per step would cost more than the copy of a large buffer).
// Every message carries the call's own OpDesc: another one with the same sequence number
// would be a mismatch. All ranks exchange records of one size; an empty record is a barrier.
class CallBootstrap : public transport::Bootstrap {
 public:
  using Gather = std::function<Status(const std::vector<uint8_t>&, std::vector<uint8_t>*, Deadline)>;
  CallBootstrap(int size, Gather gather) : size_(size), gather_(std::move(gather)) {}
  Status allgather(const std::string& name, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline deadline) override {
    std::vector<uint8_t> flat;
    Status st = gather_(mine, &flat, deadline);
    if (!st.ok()) return st.with_context("CUDA IPC exchange '" + name + "': ");
    all->assign(static_cast<size_t>(size_), {});
    for (size_t r = 0; r < all->size() && !mine.empty(); ++r) {
      (*all)[r].assign(flat.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                       flat.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
    }
    return Status::Ok();
  }

 private:
  int size_;
  Gather gather_;
};

}  // namespace

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cuda::set_device(previous_).ignore();
}

Status DeviceScope::enter(int device) {
  int current = 0;
  COLLX_RETURN_IF_ERROR(cuda::current_device(&current));
  if (device == current) return Status::Ok();
  COLLX_RETURN_IF_ERROR(cuda::set_device(device));
  if (previous_ < 0) previous_ = current;
  return Status::Ok();
}

// The v-collectives' staged route: their layouts (gaps, in place) as staging_plan.h plans
// them, whole buffers at once (no chunks: blocks of different sizes per rank).
Status Communicator::stage_v(DeviceState& d, const CollCall& call, const transport::OpDesc& desc, Deadline deadline) {
  StagingPlan plan;
  COLLX_RETURN_IF_ERROR(plan_staging(call, rank_, size_, &plan));
  char* staging = nullptr;
  COLLX_RETURN_IF_ERROR(d.staging(plan.bytes, deadline, &aborted_, &staging));
  if (!d.chunk_events[0]) COLLX_RETURN_IF_ERROR(cuda::event_create(&d.chunk_events[0]));
  for (const StagingPlan::Copy& c : plan.in) {
    COLLX_RETURN_IF_ERROR(
        cuda::copy_async(staging + c.host, c.device, c.bytes, cuda::CopyKind::kDeviceToHost, call.stream));
  }
  COLLX_RETURN_IF_ERROR(cuda::event_record(d.chunk_events[0], call.stream));
  COLLX_RETURN_IF_ERROR(
      cuda::event_wait(d.chunk_events[0], deadline, &aborted_, "the copy of the input to host staging"));
  CollCall host = call;
  host.mem_kind = COLLX_MEM_HOST;
  host.sendbuf = plan.send_at == StagingPlan::kNone ? nullptr : staging + plan.send_at;
  host.recvbuf = plan.recv_at == StagingPlan::kNone ? nullptr : staging + plan.recv_at;
  COLLX_RETURN_IF_ERROR(dispatch(host, desc, deadline));
  for (const StagingPlan::Copy& c : plan.out) {
    COLLX_RETURN_IF_ERROR(
        cuda::copy_async(c.device, staging + c.host, c.bytes, cuda::CopyKind::kHostToDevice, call.stream));
  }
  return cuda::event_record(d.staging_event, call.stream);
}

bool Communicator::stream_ordered(const CollCall& call, bool* gated) const {
  if (!device_buffers(call)) return false;
  // NCCL orders its own work on the stream (and may be set up by the executor meanwhile).
  if ((settings_.transports & COLLX_TRANSPORT_NCCL) && backend::supports(backend::BackendKind::kNccl, call.coll, size_)) return false;
  // CUDA IPC, or the staging it falls back to at run time, is decided by the executor.
  *gated =
      local_size_ == size_ && (settings_.transports & COLLX_TRANSPORT_SHM) && backend::supports(backend::BackendKind::kCudaIpc, call.coll, size_);
  return true;
}

Status Communicator::side_stream(int device, void** stream) {
  if (!device_) device_ = std::make_shared<DeviceState>();
  void*& s = device_->side_streams[device];
  if (!s) COLLX_RETURN_IF_ERROR(cuda::stream_create(&s));
  *stream = s;
  return Status::Ok();
}

Status Communicator::capture_check(const CollCall& call) const {
  // The legacy default stream (NULL) cannot be captured; host buffers never reach a stream.
  if (!call.stream || call.count == 0 || !device_buffers(call)) return Status::Ok();
  bool capturing = false;
  COLLX_RETURN_IF_ERROR(cuda::stream_capturing(call.stream, &capturing));
  if (!capturing) return Status::Ok();
  const bool p2p = call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV;
  const bool nccl_route = !p2p && (settings_.transports & COLLX_TRANSPORT_NCCL) && backend::supports(backend::BackendKind::kNccl, call.coll, size_) &&
                          !(device_ && device_->nccl_refused);
  if (nccl_route) return Status::Ok();
  // The other routes wait on the host for the stream and move data through host transports
  // now, not at replay: refuse rather than record a graph that would do nothing.
  return make_status(COLLX_ERR_INVALID_USAGE,
                     "the stream is capturing a CUDA graph, and only the NCCL route can be captured (this %s "
                     "would be staged through host memory%s, which waits on the host); allow nccl in "
                     "COLLX_TRANSPORTS with NCCL usable, or run it outside the capture",
                     p2p ? "point-to-point call" : "collective",
                     !p2p && local_size_ == size_ && (settings_.transports & COLLX_TRANSPORT_SHM) &&
                             backend::supports(backend::BackendKind::kCudaIpc, call.coll, size_)
                         ? " or go through CUDA IPC"
                         : "");
}

backend::DeviceOp device_op(const CollCall& call) {
  backend::DeviceOp op;
  op.coll = call.coll;
  op.sendbuf = call.sendbuf;
  op.recvbuf = call.recvbuf;
  op.count = call.count;
  op.datatype = static_cast<collx_datatype_t>(call.datatype);
  op.op = static_cast<collx_op_t>(call.op);
  op.premul_scalar = call.premul_scalar;
  op.root = call.root;
  op.peer = call.peer;
  op.stream = call.stream;
  return op;
}

Status Communicator::buffer_device(const void* buf, int* device) const {
  COLLX_RETURN_IF_ERROR(cuda::pointer_device(buf, device));
  if (job_.device >= 0 && *device != job_.device) {
    // A communicator bound to a device (config->device) takes buffers of that device only, as
    // an NCCL communicator does: silently running on another GPU would move the work (and
    // NCCL's channels) somewhere the engine did not plan.
    return make_status(COLLX_ERR_INVALID_ARG,
                       "the buffers are on CUDA device %d, but communicator '%s' is bound to device %d "
                       "(config->device)",
                       *device, name_.c_str(), job_.device);
  }
  return Status::Ok();
}

Status Communicator::setup_nccl(DeviceState& d, int device, Deadline deadline) {
  StoreBootstrap bootstrap(store_, prefix_ + "/nccl", rank_, size_);
  backend::BackendSetup setup;
  setup.rank = rank_;
  setup.size = size_;
  setup.device = device;
  setup.bootstrap = &bootstrap;
  setup.deadline = deadline;
  setup.abort_flag = &aborted_;
  Status st = backend::create(backend::BackendKind::kNccl, setup, &d.nccl);
  bootstrap.cleanup().ignore();
  if (st.code() != COLLX_ERR_UNSUPPORTED) return st;
  d.nccl_refused = true;
  COLLX_INFO(INIT, "communicator '%s': device buffers do not use NCCL: %s", name_.c_str(), st.message().c_str());
  return Status::Ok();
}

Status Communicator::setup_bound_device_route(Deadline deadline) {
  // Only here, at creation, where every rank takes part: were NCCL set up by a later
  // collective, a send issued before it on one rank and its receive issued after it on the
  // other would take different routes.
  if (job_.device < 0 || !(settings_.transports & COLLX_TRANSPORT_NCCL)) return Status::Ok();
  device_ = std::make_shared<DeviceState>();
  DeviceScope scope;
  // A thread without the bound device (no GPU, no CUDA) still joins the exchange: NCCL's
  // set-up then refuses on every rank alike.
  if (cuda::built_with_cuda() && cuda::device_count() > job_.device) scope.enter(job_.device).ignore();
  COLLX_RETURN_IF_ERROR(setup_nccl(*device_, job_.device, deadline));
  nccl_p2p_ = device_->nccl.get();
  if (nccl_p2p_) COLLX_INFO(INIT, "communicator '%s': point-to-point on device buffers goes over NCCL", name_.c_str());
  return Status::Ok();
}

Status Communicator::dispatch_device(const CollCall& call, const transport::OpDesc& desc, Deadline deadline) {
  if (!device_) device_ = std::make_shared<DeviceState>();
  DeviceState& d = *device_;
  // Run on the buffers' device (nonblocking calls run on the executor's thread).
  int device = 0;
  if (d.nccl && job_.device < 0) {
    device = d.nccl->device();  // NCCL set up: its device is the buffers' (one lookup less)
  } else {
    COLLX_RETURN_IF_ERROR(buffer_device(call.recvbuf ? call.recvbuf : call.sendbuf, &device));
  }
  DeviceScope scope;
  COLLX_RETURN_IF_ERROR(scope.enter(device));

  // A stream capturing a CUDA graph records work instead of running it: only NCCL's
  // operations can be captured (capture_check() refused the rest before the call began,
  // except when NCCL turned out unusable just now).
  bool capturing = false;
  if (call.stream) COLLX_RETURN_IF_ERROR(cuda::stream_capturing(call.stream, &capturing));

  if ((settings_.transports & COLLX_TRANSPORT_NCCL) && !d.nccl_refused && backend::supports(backend::BackendKind::kNccl, call.coll, size_)) {
    if (!d.nccl) COLLX_RETURN_IF_ERROR(setup_nccl(d, device, deadline));
    if (d.nccl) {
      if (settings_.nccl_check_calls) {
        // NCCL carries no call description: ranks in different calls would wait on the GPU
        // until the deadline. A dissemination barrier whose messages carry this call's OpDesc
        // over the host transport fails on every rank with COLLX_ERR_MISMATCH instead.
        algo::CollArgs args;
        args.desc = desc;
        args.deadline = deadline;
        args.datatype = COLLX_UINT8;
        algo::Context ctx = host_context();
        Status st = algo::barrier_dissemination(ctx, args);
        if (!st.ok()) return st.with_context("before the NCCL call (COLLX_NCCL_CHECK_CALLS=1): ");
      }
      backend::DeviceOp op = device_op(call);
      op.captured = capturing;
      return d.nccl->run(op, nullptr, deadline);
    }
  }
  // NCCL said no just now (capture_check() allowed the call expecting it): refuse as it does.
  if (capturing) return capture_check(call);

  if (local_size_ == size_ && (settings_.transports & COLLX_TRANSPORT_SHM) && backend::supports(backend::BackendKind::kCudaIpc, call.coll, size_)) {
    CallBootstrap bootstrap(size_, [this, &desc](const std::vector<uint8_t>& mine, std::vector<uint8_t>* all,
                                                 Deadline until) -> Status {
      algo::Context ctx = host_context();
      algo::CollArgs args;
      args.desc = desc;
      args.deadline = until;
      args.datatype = COLLX_UINT8;
      if (mine.empty()) return algo::barrier_dissemination(ctx, args);
      all->resize(mine.size() * static_cast<size_t>(size_));
      args.sendbuf = mine.data();
      args.recvbuf = all->data();
      args.count = mine.size();
      return algo::allgather_ring(ctx, args);
    });
    if (!d.ipc) {
      backend::BackendSetup setup;
      setup.rank = rank_;
      setup.size = size_;
      setup.abort_flag = &aborted_;
      COLLX_RETURN_IF_ERROR(backend::create(backend::BackendKind::kCudaIpc, setup, &d.ipc));
    }
    Status st = d.ipc->run(device_op(call), &bootstrap, deadline);
    // UNSUPPORTED: a rank's buffer cannot be shared (not from cudaMalloc); every rank saw the
    // same exchange and falls back to staging alike.
    if (st.code() != COLLX_ERR_UNSUPPORTED) return st;
    COLLX_INFO(COLL, "communicator '%s': %s; staging through host memory", name_.c_str(), st.message().c_str());
  }

  if (coll_is_v(call.coll)) return stage_v(d, call, desc, deadline);

  // Staged: device -> pinned host, the host algorithm, pinned host -> device, every copy on
  // the caller's stream. The element-wise collectives (all-reduce, broadcast, reduce) go in
  // chunks through two slots, so the copies of one chunk overlap the network and reductions
  // of the other; the rest stage whole buffers.
  const size_t n = static_cast<size_t>(size_);
  const size_t element = datatype_size(call.datatype);
  size_t send_count = call.count, recv_count = call.count;
  if (call.coll == COLLX_COLL_REDUCE_SCATTER) send_count *= n;
  if (call.coll == COLLX_COLL_ALLGATHER) recv_count *= n;
  if (call.coll == COLLX_COLL_ALLTOALL) send_count *= n, recv_count *= n;
  if (call.coll == COLLX_COLL_GATHER) recv_count *= n;
  if (call.coll == COLLX_COLL_SCATTER) send_count *= n;
  const bool roots_send = call.coll == COLLX_COLL_BROADCAST || call.coll == COLLX_COLL_SCATTER;
  const bool roots_recv = call.coll == COLLX_COLL_REDUCE || call.coll == COLLX_COLL_GATHER;
  const bool has_send = call.sendbuf && !(roots_send && call.root != rank_);
  const bool has_recv = call.recvbuf && !(roots_recv && call.root != rank_);
  const bool elementwise = call.coll == COLLX_COLL_ALLREDUCE || call.coll == COLLX_COLL_BROADCAST ||
                           call.coll == COLLX_COLL_REDUCE;
  size_t chunk = call.count;
  if (elementwise && call.count * element > kStagingChunkBytes) chunk = kStagingChunkBytes / element;
  const size_t chunks = (call.count + chunk - 1) / chunk;
  const size_t slots = chunks > 1 ? 2 : 1;
  const size_t send_slot = has_send ? (elementwise ? chunk : send_count) * element : 0;
  const size_t recv_slot = has_recv ? (elementwise ? chunk : recv_count) * element : 0;
  char* staging = nullptr;
  COLLX_RETURN_IF_ERROR(d.staging(slots * (send_slot + recv_slot), deadline, &aborted_, &staging));
  for (void*& e : d.chunk_events) {
    if (!e) COLLX_RETURN_IF_ERROR(cuda::event_create(&e));
  }
  auto slot_send = [&](size_t k) { return staging + (k % slots) * (send_slot + recv_slot); };
  auto slot_recv = [&](size_t k) { return slot_send(k) + send_slot; };
  auto elements = [&](size_t k) { return elementwise ? std::min(chunk, call.count - k * chunk) : 0; };
  // Chunk k's input into its slot, then its event. Queued after the copy back of chunk k - 2
  // (same slot), so waiting for the event also frees that slot's output half.
  auto stage_in = [&](size_t k) -> Status {
    if (has_send) {
      const size_t bytes = elementwise ? elements(k) * element : send_slot;
      COLLX_RETURN_IF_ERROR(cuda::copy_async(slot_send(k), static_cast<const char*>(call.sendbuf) + k * chunk * element,
                                             bytes, cuda::CopyKind::kDeviceToHost, call.stream));
    }
    return cuda::event_record(d.chunk_events[k % slots], call.stream);
  };
  COLLX_RETURN_IF_ERROR(stage_in(0));
  for (size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) COLLX_RETURN_IF_ERROR(stage_in(k + 1));
    COLLX_RETURN_IF_ERROR(cuda::event_wait(d.chunk_events[k % slots], deadline, &aborted_,
                                           "the copy of the input to host staging"));
    CollCall host = call;
    host.mem_kind = COLLX_MEM_HOST;
    host.sendbuf = has_send ? slot_send(k) : nullptr;
    host.recvbuf = has_recv ? slot_recv(k) : nullptr;
    if (elementwise) host.count = elements(k);
    // Each chunk is a whole run of the schedule under the call's OpDesc; the chunks follow
    // one another in the same order on every rank, so their messages match in order.
    COLLX_RETURN_IF_ERROR(dispatch(host, desc, deadline));
    if (has_recv) {
      const size_t bytes = elementwise ? elements(k) * element : recv_slot;
      COLLX_RETURN_IF_ERROR(cuda::copy_async(static_cast<char*>(call.recvbuf) + k * chunk * element, slot_recv(k), bytes,
                                             cuda::CopyKind::kHostToDevice, call.stream));
    }
  }
  // Later work on the stream sees the result; the next staged call waits for this copy.
  return cuda::event_record(d.staging_event, call.stream);
}

}  // namespace collx
