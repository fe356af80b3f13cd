// create_ucx_transport: UCP context and worker, worker-address exchange, endpoints.
#include "transports/ucx/ucx_transport.h"

#ifdef COLLX_HAVE_UCX
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "transports/ucx/ucx_engine.h"
#endif

namespace collx {

#ifndef COLLX_HAVE_UCX

bool ucx_transport_built() { return false; }

Status create_ucx_transport(const UcxTransportParams&, std::unique_ptr<transport::Transport>*) {
  return make_status(COLLX_ERR_UNSUPPORTED,
                     "ucx transport: collx was built without UCX (install libucx-dev and re-run cmake)");
}

#else

bool ucx_transport_built() { return true; }

namespace ucx {

namespace {
constexpr uint32_t kBlobMagic = 0x42585543;  // "CUXB"
constexpr int kHeaderSlots = 16;
constexpr size_t kMaxAddressBytes = 64 << 10;

void ep_error_cb(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<Peer*>(arg);
  p->engine->run_callback([&] { p->engine->on_ep_error(p, status); });
}

// Blob: magic, rank, comm_id, pid, pid-space id (length + bytes), worker address (length + bytes).
struct BlobFixed {
  uint32_t magic;
  int32_t rank;
  uint64_t comm_id;
  int64_t pid;
  uint32_t space_len;
  uint32_t address_len;
};

Status ucx_error(const char* what, ucs_status_t status) {
  return make_status(COLLX_ERR_SYSTEM, "ucx transport: %s failed (UCX: %s)", what, ucs_status_string(status));
}

// UCX aborts the process (an assertion in its async thread set-up) when it runs out of file
// descriptors while starting, and reports other shortages as "Input/output error". A UCP
// context and worker with 8 ranks' endpoints took 34 to 51 descriptors here; below this
// many free ones the transport is refused with the reason instead.
constexpr long kUcxDescriptorsNeeded = 64;

Status check_descriptor_headroom() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return Status::Ok();
  long open_now = 0;
  long free_now = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) open_now += entry->d_name[0] != '.';
    closedir(dir);
    --open_now;  // the directory stream itself
    free_now = static_cast<long>(limit.rlim_cur) - open_now;
  } else if (errno == EMFILE || errno == ENFILE) {
    open_now = static_cast<long>(limit.rlim_cur);  // not even one to spare for the listing
  } else {
    return Status::Ok();  // cannot tell: let UCX try
  }
  if (free_now >= kUcxDescriptorsNeeded) return Status::Ok();
  return make_status(COLLX_ERR_SYSTEM,
                     "ucx transport: only %ld file descriptors are free (%ld open, RLIMIT_NOFILE %llu), fewer than "
                     "the %ld UCX needs to start (it aborts the process when it runs out): raise the open-file "
                     "limit (ulimit -n), or leave ucx out of COLLX_TRANSPORTS",
                     free_now, open_now, static_cast<unsigned long long>(limit.rlim_cur), kUcxDescriptorsNeeded);
}
}  // namespace

Status UcxEngine::init_worker() {
  COLLX_RETURN_IF_ERROR(check_descriptor_headroom());
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucx_error("ucp_config_read", st);
  // UCX's default keepalive (20 s) would let a dead peer on a remote host go unnoticed far
  // longer than collx promises; same-host peers are also watched by pid.
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    ucp_config_modify(config, "KEEPALIVE_INTERVAL", "1s");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) return ucx_error("ucp_init", st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // every UCX call happens under the engine's mutex
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) return ucx_error("ucp_worker_create", st);
  st = ucp_worker_get_efd(worker_, &efd_);
  if (st != UCS_OK) return ucx_error("ucp_worker_get_efd", st);
  if (wake_fd_ < 0) return system_error("ucx transport: eventfd", errno);
  return Status::Ok();
}

Status UcxEngine::local_address(std::vector<uint8_t>* blob) {
  ucp_address_t* address = nullptr;
  size_t len = 0;
  ucs_status_t st = ucp_worker_get_address(worker_, &address, &len);
  if (st != UCS_OK) return ucx_error("ucp_worker_get_address", st);
  const std::string space = pid_space_id();
  BlobFixed fixed{kBlobMagic, rank_, comm_id_, static_cast<int64_t>(::getpid()), static_cast<uint32_t>(space.size()),
                  static_cast<uint32_t>(len)};
  blob->resize(sizeof fixed + space.size() + len);
  std::memcpy(blob->data(), &fixed, sizeof fixed);
  std::memcpy(blob->data() + sizeof fixed, space.data(), space.size());
  std::memcpy(blob->data() + sizeof fixed + space.size(), address, len);
  ucp_worker_release_address(worker_, address);
  return Status::Ok();
}

Status UcxEngine::connect(const std::vector<std::vector<uint8_t>>& blobs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (blobs.size() != static_cast<size_t>(size_)) {
    return make_status(COLLX_ERR_PROTOCOL, "ucx transport: bootstrap returned %zu addresses for %d ranks",
                       blobs.size(), size_);
  }
  const std::string my_space = pid_space_id();
  bool peer_errors = true;
  COLLX_RETURN_IF_ERROR(setting_bool(SettingId::UCX_PEER_ERRORS, &peer_errors));
  for (int r = 0; r < size_; ++r) {
    const std::vector<uint8_t>& b = blobs[r];
    BlobFixed f{};
    if (b.size() >= sizeof f) std::memcpy(&f, b.data(), sizeof f);
    if (b.size() < sizeof f || f.magic != kBlobMagic || f.rank != r || f.address_len > kMaxAddressBytes ||
        b.size() != sizeof f + f.space_len + f.address_len) {
      return make_status(COLLX_ERR_PROTOCOL, "ucx transport: malformed worker address from rank %d", r);
    }
    if (f.comm_id != comm_id_) {
      return make_status(COLLX_ERR_PROTOCOL, "ucx transport: rank %d belongs to communicator %016llx, not %016llx", r,
                         static_cast<unsigned long long>(f.comm_id), static_cast<unsigned long long>(comm_id_));
    }
    Peer& p = *peers_[r];
    p.pid = f.pid;
    const std::string space(reinterpret_cast<const char*>(b.data()) + sizeof f, f.space_len);
    const bool same_host = space == my_space;
    if (r != rank_ && same_host && f.pid != ::getpid() && f.pid > 0) p.process.watch(static_cast<pid_t>(f.pid));
    // UCX 1.13 offers no shared-memory transport to endpoints with peer error handling.
    p.peer_errors = peer_errors || !same_host;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(b.data() + sizeof f + f.space_len);
    ep.err_mode = p.peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = ep_error_cb;
    ep.err_handler.arg = &p;
    ucs_status_t st = ucp_ep_create(worker_, &ep, &p.ep);
    if (st != UCS_OK) {
      p.ep = nullptr;
      return make_status(COLLX_ERR_REMOTE, "ucx transport: cannot reach rank %d (UCX: %s)", r, ucs_status_string(st));
    }
  }
  for (int i = 0; i < kHeaderSlots; ++i) {
    auto slot = std::make_unique<HeaderSlot>();
    slot->engine = this;
    slot->buf.resize(kHeaderBufBytes);
    COLLX_RETURN_IF_ERROR(post_header_slot(slot.get()));
    slots_.push_back(std::move(slot));
  }
  last_liveness_us_ = monotonic_us();
  return Status::Ok();
}

}  // namespace ucx

Status create_ucx_transport(const UcxTransportParams& params, std::unique_ptr<transport::Transport>* out) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "ucx transport: null output");
  if (params.bootstrap == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "ucx transport: no bootstrap");
  if (params.size < 1 || params.size > ucx::kMaxRanks || params.rank < 0 || params.rank >= params.size) {
    return make_status(COLLX_ERR_INVALID_ARG, "ucx transport: rank %d of %d out of range (at most %d ranks)",
                       params.rank, params.size, ucx::kMaxRanks);
  }
  auto engine = std::make_unique<ucx::UcxEngine>(params);
  COLLX_RETURN_IF_ERROR(engine->init_worker());
  std::vector<uint8_t> mine;
  COLLX_RETURN_IF_ERROR(engine->local_address(&mine));
  std::vector<std::vector<uint8_t>> all;
  COLLX_RETURN_IF_ERROR(params.bootstrap->allgather(params.bootstrap_name + ".addresses", mine, &all, params.deadline));
  COLLX_RETURN_IF_ERROR(engine->connect(all));
  COLLX_RETURN_IF_ERROR(engine->wire_up(params.deadline));
  COLLX_INFO(NET, "rank %d: ucx transport up (%d ranks, worker address %zu bytes)", params.rank, params.size,
             mine.size());
  *out = std::move(engine);
  return Status::Ok();
}

#endif  // COLLX_HAVE_UCX

}  // namespace collx
