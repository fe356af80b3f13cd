// NCCL backend (see nccl_comm.h). Built only with nccl.h at hand (COLLX_HAVE_NCCL); NCCL's
// functions are looked up in libnccl.so.2 at run time.
#include "backends/nccl/nccl_comm.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/common/log.h"
#include "lib/common/periodic_thread.h"
#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"

#if COLLX_HAVE_NCCL && COLLX_HAVE_CUDA
#include <dlfcn.h>
#include <nccl.h>
#endif

namespace collx {
namespace nccl {

#if COLLX_HAVE_NCCL && COLLX_HAVE_CUDA

namespace {

// The functions collx calls, resolved once from libnccl.so.2.
struct Api {
  void* lib = nullptr;
  std::string why;
  int version = 0;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) = nullptr;
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
};

template <typename Fn>
bool resolve(Api* api, Fn* fn, const char* name) {
  *fn = reinterpret_cast<Fn>(dlsym(api->lib, name));
  if (!*fn && api->why.empty()) api->why = std::string("libnccl.so.2 has no ") + name;
  return *fn != nullptr;
}

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      const char* err = dlerror();
      a.why = std::string("cannot load libnccl.so.2: ") + (err ? err : "not found");
      return;
    }
    bool ok = resolve(&a, &a.GetVersion, "ncclGetVersion") & resolve(&a, &a.GetUniqueId, "ncclGetUniqueId") &
              resolve(&a, &a.CommInitRankConfig, "ncclCommInitRankConfig") &
              resolve(&a, &a.CommDestroy, "ncclCommDestroy") & resolve(&a, &a.CommAbort, "ncclCommAbort") &
              resolve(&a, &a.CommGetAsyncError, "ncclCommGetAsyncError") &
              resolve(&a, &a.GetErrorString, "ncclGetErrorString") & resolve(&a, &a.GetLastError, "ncclGetLastError") &
              resolve(&a, &a.RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum") &
              resolve(&a, &a.RedOpDestroy, "ncclRedOpDestroy") & resolve(&a, &a.AllReduce, "ncclAllReduce") &
              resolve(&a, &a.ReduceScatter, "ncclReduceScatter") & resolve(&a, &a.AllGather, "ncclAllGather") &
              resolve(&a, &a.Broadcast, "ncclBroadcast") & resolve(&a, &a.Reduce, "ncclReduce") &
              resolve(&a, &a.Send, "ncclSend") & resolve(&a, &a.Recv, "ncclRecv") &
              resolve(&a, &a.GroupStart, "ncclGroupStart") & resolve(&a, &a.GroupEnd, "ncclGroupEnd");
    if (ok && a.GetVersion(&a.version) != ncclSuccess) a.version = 0;
    if (!ok) {
      dlclose(a.lib);
      a.lib = nullptr;
    }
  });
  return a;
}

collx_status_t code_of(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return COLLX_OK;
    case ncclInProgress: return COLLX_IN_PROGRESS;
    case ncclInvalidArgument: return COLLX_ERR_INVALID_ARG;
    case ncclInvalidUsage: return COLLX_ERR_INVALID_USAGE;
    case ncclRemoteError: return COLLX_ERR_REMOTE;
    case ncclSystemError: return COLLX_ERR_SYSTEM;
    case ncclUnhandledCudaError: return COLLX_ERR_CUDA;
    default: return COLLX_ERR_NCCL;
  }
}

// NCCL's error with its own message kept: "<what>: <ncclGetErrorString> (<ncclGetLastError>)".
Status nccl_status(ncclResult_t r, const char* what, ncclComm_t comm) {
  if (r == ncclSuccess) return Status::Ok();
  const Api& a = api();
  const char* last = a.GetLastError ? a.GetLastError(comm) : "";
  return make_status(code_of(r), "NCCL %s failed: %s%s%s%s", what, a.GetErrorString ? a.GetErrorString(r) : "error",
                     last && *last ? " (" : "", last && *last ? last : "", last && *last ? ")" : "");
}

bool datatype_of(collx_datatype_t dt, ncclDataType_t* out) {
  switch (dt) {
    case COLLX_INT8: *out = ncclInt8; return true;
    case COLLX_UINT8: *out = ncclUint8; return true;
    case COLLX_INT32: *out = ncclInt32; return true;
    case COLLX_UINT32: *out = ncclUint32; return true;
    case COLLX_INT64: *out = ncclInt64; return true;
    case COLLX_UINT64: *out = ncclUint64; return true;
    case COLLX_FLOAT16: *out = ncclFloat16; return true;
    case COLLX_BFLOAT16: *out = ncclBfloat16; return true;
    case COLLX_FLOAT32: *out = ncclFloat32; return true;
    case COLLX_FLOAT64: *out = ncclFloat64; return true;
    default: return false;
  }
}

// A reduction op; PREMUL_SUM creates one (destroyed by the caller after the call).
bool op_of(collx_op_t op, ncclRedOp_t* out) {
  switch (op) {
    case COLLX_SUM: *out = ncclSum; return true;
    case COLLX_PROD: *out = ncclProd; return true;
    case COLLX_MIN: *out = ncclMin; return true;
    case COLLX_MAX: *out = ncclMax; return true;
    case COLLX_AVG: *out = ncclAvg; return true;
    default: return false;
  }
}

struct Pending {
  void* event;
  Deadline deadline;
};

// Every NCCL communicator of the process is watched by one thread, every 2 ms. Never
// destroyed: a communicator left to process exit must not find its watchdog gone.
PeriodicThread& shared_watchdog() {
  static PeriodicThread* watchdog = new PeriodicThread(std::chrono::milliseconds(2));
  return *watchdog;
}

}  // namespace

struct Comm::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  int device = 0;
  std::atomic<bool> broken{false};
  const std::atomic<bool>* abort_flag = nullptr;
  bool ready = false;  // ncclCommInitRankConfig completed
  // Held around every use of `comm` by callers, and by fail() around ncclCommAbort, so the
  // communicator is never freed under a call (NCCL calls of a nonblocking communicator do
  // not block: the lock is held for one enqueue).
  std::mutex call_mu;
  bool nccl_gone = false;  // ncclCommAbort done (under call_mu)
  mutable std::mutex mu;
  Status failure;
  // Operations on the GPU with their deadlines, oldest first; events reused from `spare`.
  std::deque<Pending> pending;
  std::vector<void*> spare;
  PeriodicThread::TaskId watch_id = 0;  // registered with the process's shared watchdog

  void fail(const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure.ok()) return;
      failure = why;
    }
    broken.store(true, std::memory_order_release);
    COLLX_WARN(NET, "aborting the NCCL communicator: %s", why.message().c_str());
    std::lock_guard<std::mutex> call(call_mu);
    if (!nccl_gone && comm) (void)api().CommAbort(comm);
    nccl_gone = true;
  }

  Status health() const {
    std::lock_guard<std::mutex> lock(mu);
    return failure;
  }

  // NCCL calls of a nonblocking communicator may return ncclInProgress: poll until done, the
  // deadline, or an abort (the caller then calls fail(), outside call_mu).
  Status settle(ncclResult_t r, const char* what, Deadline deadline) {
    for (int polls = 0; r == ncclInProgress; ++polls) {
      ncclResult_t async = ncclSuccess;
      ncclResult_t q = api().CommGetAsyncError(comm, &async);
      if (q != ncclSuccess) return nccl_status(q, "ncclCommGetAsyncError", comm);
      r = async;
      if (r != ncclInProgress) break;
      if (deadline.expired()) {
        return make_status(COLLX_ERR_TIMEOUT, "NCCL %s did not finish before the deadline (a rank missing?)", what);
      }
      if ((abort_flag && abort_flag->load(std::memory_order_acquire)) || broken.load(std::memory_order_acquire)) {
        return make_status(COLLX_ERR_ABORTED, "NCCL %s was interrupted: the communicator was aborted", what);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 10 : 500));
    }
    return nccl_status(r, what, comm);
  }

  // One watchdog round (on the process's shared watchdog thread, every 2 ms): the abort flag,
  // the oldest unfinished operation against its deadline, NCCL's asynchronous errors.
  void watch() {
    std::unique_lock<std::mutex> lock(mu);
    if (!failure.ok()) return;
    if (abort_flag && abort_flag->load(std::memory_order_acquire)) {
      lock.unlock();
      fail(make_status(COLLX_ERR_ABORTED, "collx_comm_abort was called"));
      return;
    }
    // Completed operations leave the queue; the oldest unfinished one is checked.
    while (!pending.empty()) {
      bool done = false;
      Status st = cuda::event_done(pending.front().event, &done);
      if (!st.ok() || !done) {
        if (!st.ok() || pending.front().deadline.expired()) {
          Status why = st.ok() ? make_status(COLLX_ERR_TIMEOUT, "an NCCL operation on the GPU did not finish "
                                                                "before its deadline (a rank missing or stuck?)")
                               : st;
          lock.unlock();
          fail(why);
          return;
        }
        break;
      }
      spare.push_back(pending.front().event);
      pending.pop_front();
    }
    // NCCL's own errors (a peer's failure among them). `comm` is only touched under call_mu
    // (lock order: call_mu before mu, so mu is released first); a caller holding call_mu is
    // enqueueing and will see the error itself.
    lock.unlock();
    Status why;
    {
      std::unique_lock<std::mutex> call(call_mu, std::try_to_lock);
      ncclResult_t async = ncclSuccess;
      if (call.owns_lock() && !nccl_gone && api().CommGetAsyncError(comm, &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress) {
        why = nccl_status(async, "operation (reported asynchronously)", comm);
      }
    }
    if (!why.ok()) fail(why);
  }

  ~Impl() {
    if (watch_id) shared_watchdog().remove(watch_id);  // never runs again once this returns
    if (comm && !nccl_gone) {
      bool clean = ready && failure.ok();
      for (const Pending& p : pending) {
        bool done = false;
        if (!cuda::event_done(p.event, &done).ok() || !done) clean = false;
      }
      (void)(clean ? api().CommDestroy(comm) : api().CommAbort(comm));
    }
    for (const Pending& p : pending) cuda::event_destroy(p.event);
    for (void* e : spare) cuda::event_destroy(e);
  }
};

bool available(std::string* why) {
  if (cuda::emulated()) {  // NCCL's kernels would run on a GPU that is not there
    if (why) *why = "the emulated test device (COLLX_TEST_DEVICE=emulated) cannot run NCCL";
    return false;
  }
  std::string cuda_why;
  if (cuda::device_count(&cuda_why) == 0) {
    if (why) *why = cuda_why;
    return false;
  }
  const Api& a = api();
  if (why) *why = a.why;
  return a.lib != nullptr;
}

std::string library_version() {
  const Api& a = api();
  if (!a.lib) return "";
  const int v = a.version;  // 22803 = 2.28.3
  return string_printf("%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;

Status Comm::create(transport::Bootstrap* bootstrap, int rank, int size, int device, Deadline deadline,
                    const std::atomic<bool>* abort_flag, std::unique_ptr<Comm>* out) {
  std::string why;
  // Every rank contributes a record, even one that cannot use NCCL, so all decide alike.
  const bool usable = available(&why);
  struct Record {
    uint8_t usable;
    uint8_t uuid[16];
    ncclUniqueId id;
  } mine;
  std::memset(&mine, 0, sizeof mine);
  mine.usable = usable ? 1 : 0;
  if (usable) {
    COLLX_RETURN_IF_ERROR(cuda::device_uuid(device, mine.uuid));
    if (rank == 0) COLLX_RETURN_IF_ERROR(nccl_status(api().GetUniqueId(&mine.id), "ncclGetUniqueId", nullptr));
  }
  std::vector<uint8_t> bytes(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  std::vector<std::vector<uint8_t>> all;
  COLLX_RETURN_IF_ERROR(bootstrap->allgather("nccl", bytes, &all, deadline));
  std::vector<Record> records(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(Record)) {
      return make_status(COLLX_ERR_PROTOCOL, "NCCL set-up: rank %zu sent %zu bytes, expected %zu", r, all[r].size(),
                         sizeof(Record));
    }
    std::memcpy(&records[r], all[r].data(), sizeof(Record));
  }
  for (size_t r = 0; r < records.size(); ++r) {
    if (!records[r].usable) {
      return make_status(COLLX_ERR_UNSUPPORTED, "NCCL is not usable on rank %zu%s%s", r,
                         static_cast<int>(r) == rank ? ": " : "", static_cast<int>(r) == rank ? why.c_str() : "");
    }
    for (size_t q = 0; q < r; ++q) {
      if (std::memcmp(records[r].uuid, records[q].uuid, 16) == 0) {
        return make_status(COLLX_ERR_UNSUPPORTED, "ranks %zu and %zu share one GPU, which NCCL refuses", q, r);
      }
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->size = size;
  impl->device = device;
  impl->abort_flag = abort_flag;
  COLLX_RETURN_IF_ERROR(cuda::set_device(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // collx polls with its deadline instead
  ncclResult_t r = api().CommInitRankConfig(&impl->comm, size, records[0].id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    Status st = nccl_status(r, "ncclCommInitRankConfig", impl->comm);
    if (impl->comm) (void)api().CommAbort(impl->comm);
    impl->comm = nullptr;
    return st;
  }
  Status st = impl->settle(r, "ncclCommInitRankConfig", deadline);
  if (!st.ok()) return st;  // ~Impl aborts the half-made communicator
  impl->ready = true;
  impl->watch_id = shared_watchdog().add([p = impl.get()] { p->watch(); });
  out->reset(new Comm(std::move(impl)));
  return Status::Ok();
}

namespace {
// Hands the completion of what is queued on `stream` and its deadline to the watchdog.
Status watch_on(Comm::Impl& m, void* stream, Deadline deadline) {
  void* event = nullptr;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.spare.empty()) {
      event = m.spare.back();
      m.spare.pop_back();
    }
  }
  if (!event) COLLX_RETURN_IF_ERROR(cuda::event_create(&event));
  Status st = cuda::event_record(event, stream);
  std::lock_guard<std::mutex> lock(m.mu);
  if (!st.ok()) {
    m.spare.push_back(event);
    return st;
  }
  m.pending.push_back(Pending{event, deadline});
  return Status::Ok();
}
}  // namespace

Status Comm::health() const { return impl_->health(); }
int Comm::device() const { return impl_->device; }

void Comm::abort(const Status& why) { impl_->fail(why); }

Status Comm::enqueue(const CollOp& o, Deadline deadline) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> call(m.call_mu);
  if (m.broken.load(std::memory_order_acquire)) return m.health();
  const Api& a = api();
  ncclDataType_t dt;
  if (!datatype_of(o.datatype, &dt)) {
    return make_status(COLLX_ERR_INVALID_ARG, "NCCL backend: unknown datatype %d", static_cast<int>(o.datatype));
  }
  auto stream = static_cast<cudaStream_t>(o.stream);
  ncclRedOp_t op = ncclSum;
  bool custom_op = false;
  const bool reduces = o.coll == COLLX_COLL_ALLREDUCE || o.coll == COLLX_COLL_REDUCE_SCATTER || o.coll == COLLX_COLL_REDUCE;
  if (reduces && !op_of(o.op, &op)) {
    if (o.op != COLLX_PREMUL_SUM) {
      return make_status(COLLX_ERR_INVALID_ARG, "NCCL backend: unknown op %d", static_cast<int>(o.op));
    }
    // The scalar converted to the datatype exactly as the host path does (scale of a one).
    uint64_t one_bits = 0, scalar_bits = 0;
    const uint64_t one_int = 1;
    const float one_f = 1.0f;
    const double one_d = 1.0;
    switch (o.datatype) {
      case COLLX_FLOAT16: one_bits = float_to_half(1.0f); break;
      case COLLX_BFLOAT16: one_bits = float_to_bfloat16(1.0f); break;
      case COLLX_FLOAT32: std::memcpy(&one_bits, &one_f, sizeof one_f); break;
      case COLLX_FLOAT64: std::memcpy(&one_bits, &one_d, sizeof one_d); break;
      default: one_bits = one_int; break;  // little-endian: the low bytes hold 1
    }
    scale(&scalar_bits, &one_bits, 1, o.datatype, o.premul_scalar);
    COLLX_RETURN_IF_ERROR(nccl_status(a.RedOpCreatePreMulSum(&op, &scalar_bits, dt, ncclScalarHostImmediate, m.comm),
                                      "ncclRedOpCreatePreMulSum", m.comm));
    custom_op = true;
  }
  ncclResult_t r = ncclSuccess;
  const char* what = "collective";
  const size_t element = datatype_size(o.datatype);
  switch (o.coll) {
    case COLLX_COLL_ALLREDUCE:
      what = "ncclAllReduce";
      r = a.AllReduce(o.sendbuf, o.recvbuf, o.count, dt, op, m.comm, stream);
      break;
    case COLLX_COLL_REDUCE_SCATTER:
      what = "ncclReduceScatter";
      r = a.ReduceScatter(o.sendbuf, o.recvbuf, o.count, dt, op, m.comm, stream);
      break;
    case COLLX_COLL_ALLGATHER:
      what = "ncclAllGather";
      r = a.AllGather(o.sendbuf, o.recvbuf, o.count, dt, m.comm, stream);
      break;
    case COLLX_COLL_BROADCAST:
      what = "ncclBroadcast";
      r = a.Broadcast(o.sendbuf, o.recvbuf, o.count, dt, o.root, m.comm, stream);
      break;
    case COLLX_COLL_REDUCE:
      what = "ncclReduce";
      r = a.Reduce(o.sendbuf, o.recvbuf, o.count, dt, op, o.root, m.comm, stream);
      break;
    case COLLX_COLL_ALLTOALL: {
      what = "all-to-all (grouped ncclSend/ncclRecv)";
      r = a.GroupStart();
      for (int p = 0; p < m.size && (r == ncclSuccess || r == ncclInProgress); ++p) {
        const size_t off = static_cast<size_t>(p) * o.count * element;
        r = a.Send(static_cast<const char*>(o.sendbuf) + off, o.count, dt, p, m.comm, stream);
        if (r == ncclSuccess || r == ncclInProgress) {
          r = a.Recv(static_cast<char*>(o.recvbuf) + off, o.count, dt, p, m.comm, stream);
        }
      }
      ncclResult_t end = a.GroupEnd();
      if (r == ncclSuccess || r == ncclInProgress) r = end;
      break;
    }
    case COLLX_COLL_SEND:
      what = "ncclSend";
      r = a.Send(o.sendbuf, o.count, dt, o.peer, m.comm, stream);
      break;
    case COLLX_COLL_RECV:
      what = "ncclRecv";
      r = a.Recv(o.recvbuf, o.count, dt, o.peer, m.comm, stream);
      break;
    default:
      if (custom_op) (void)a.RedOpDestroy(op, m.comm);
      return make_status(COLLX_ERR_UNSUPPORTED, "NCCL backend: collective %d is not delegated to NCCL",
                         static_cast<int>(o.coll));
  }
  Status st = m.settle(r, what, deadline);
  if (custom_op) (void)a.RedOpDestroy(op, m.comm);
  if (!st.ok()) {
    call.unlock();
    if (st.code() != COLLX_ERR_INVALID_ARG) m.fail(st);
    return st;
  }
  if (deadline.is_never() || o.captured) return Status::Ok();
  return watch_on(m, o.stream, deadline);
}

Status Comm::enqueue_p2p(const CollOp* ops, size_t n, Deadline deadline) {
  Impl& m = *impl_;
  std::vector<ncclDataType_t> types(n);
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].coll != COLLX_COLL_SEND && ops[i].coll != COLLX_COLL_RECV) {
      return make_status(COLLX_ERR_INTERNAL, "NCCL backend: enqueue_p2p got collective %d",
                         static_cast<int>(ops[i].coll));
    }
    if (!datatype_of(ops[i].datatype, &types[i])) {
      return make_status(COLLX_ERR_INVALID_ARG, "NCCL backend: unknown datatype %d", static_cast<int>(ops[i].datatype));
    }
  }
  std::unique_lock<std::mutex> call(m.call_mu);
  if (m.broken.load(std::memory_order_acquire)) return m.health();
  const Api& a = api();
  // One group: NCCL matches the sends and receives of a group together, so two ranks that
  // both send then receive do not wait on each other's kernels.
  ncclResult_t r = a.GroupStart();
  for (size_t i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); ++i) {
    const CollOp& o = ops[i];
    auto stream = static_cast<cudaStream_t>(o.stream);
    r = o.coll == COLLX_COLL_SEND ? a.Send(o.sendbuf, o.count, types[i], o.peer, m.comm, stream)
                                  : a.Recv(o.recvbuf, o.count, types[i], o.peer, m.comm, stream);
  }
  const ncclResult_t end = a.GroupEnd();
  if (r == ncclSuccess || r == ncclInProgress) r = end;
  Status st = m.settle(r, "point-to-point (grouped ncclSend/ncclRecv)", deadline);
  if (!st.ok()) {
    call.unlock();
    if (st.code() != COLLX_ERR_INVALID_ARG) m.fail(st);
    return st;
  }
  if (deadline.is_never()) return Status::Ok();
  for (size_t i = 0; i < n; ++i) {
    bool seen = false;  // one deadline event per stream of the group
    for (size_t j = 0; j < i; ++j) seen = seen || ops[j].stream == ops[i].stream;
    if (!seen && !ops[i].captured) COLLX_RETURN_IF_ERROR(watch_on(m, ops[i].stream, deadline));
  }
  return Status::Ok();
}

#else  // no NCCL header or no CUDA: the backend is never chosen

struct Comm::Impl {};

bool available(std::string* why) {
  if (why) *why = "collx was built without NCCL (nccl.h and CUDA not found at configure time)";
  return false;
}
std::string library_version() { return ""; }
Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
Status Comm::create(transport::Bootstrap*, int, int, int, Deadline, const std::atomic<bool>*, std::unique_ptr<Comm>*) {
  std::string why;
  available(&why);
  return make_status(COLLX_ERR_UNSUPPORTED, "%s", why.c_str());
}
Status Comm::enqueue(const CollOp&, Deadline) { return make_status(COLLX_ERR_UNSUPPORTED, "no NCCL in this build"); }
Status Comm::enqueue_p2p(const CollOp*, size_t, Deadline) {
  return make_status(COLLX_ERR_UNSUPPORTED, "no NCCL in this build");
}
void Comm::abort(const Status&) {}
Status Comm::health() const { return Status::Ok(); }
int Comm::device() const { return -1; }

#endif

}  // namespace nccl
}  // namespace collx
