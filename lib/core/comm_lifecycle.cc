// Communicator lifecycle: creation (world, split, dup), health, abort and destroy.
#include <algorithm>
#include <cstring>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/core/comm.h"
#include "lib/core/host_identity.h"
#include "lib/core/names.h"

namespace collx {


Status CommSettings::from_environment(const JobConfig& job, CommSettings* out) {
  CommSettings s;
  s.timeout_ms = job.timeout_ms;
  uint64_t size_value = 0;
  bool found = false;
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::CHUNK_SIZE, &size_value, &found));
  if (found) {
    if (size_value < 64) {
      return make_status(COLLX_ERR_INVALID_ARG, "COLLX_CHUNK_SIZE=%llu is below the minimum of 64 bytes",
                         static_cast<unsigned long long>(size_value));
    }
    s.chunk_bytes = size_value;
  }
  s.transports = job.transports;
  COLLX_RETURN_IF_ERROR(setting_bool(SettingId::NCCL_CHECK_CALLS, &s.nccl_check_calls));
  COLLX_RETURN_IF_ERROR(AlgorithmSelector::parse(setting_raw(SettingId::ALGO), &s.selector));
  s.tune_file = setting_raw(SettingId::TUNE_FILE);
  if (!s.tune_file.empty()) COLLX_RETURN_IF_ERROR(load_tune_file(s.tune_file, &s.tuned));
  *out = std::move(s);
  return Status::Ok();
}

Status Communicator::create(const JobConfig& job, std::shared_ptr<Communicator>* out) {
  CommSettings settings;
  COLLX_RETURN_IF_ERROR(CommSettings::from_environment(job, &settings));
  const Deadline deadline = Deadline::after_ms(job.timeout_ms);

  std::shared_ptr<Store> store = job.store;
  if (!store && job.world_size > 1) {
    COLLX_RETURN_IF_ERROR(open_tcp_store(job.store_addr, job.rank, deadline, &store));
  } else if (!store) {
    store = make_memory_store();  // a world of one needs nobody
  }
  std::string prefix;
  COLLX_RETURN_IF_ERROR(next_world_prefix(store.get(), job.rank, &prefix));
  std::shared_ptr<Communicator> comm(new Communicator());
  comm->job_ = job;
  comm->name_ = job.name;
  Status st = comm->init(job, settings, std::move(store), prefix, job.rank, job.world_size);
  if (!st.ok()) return st;
  st = apply_cpu_binding(comm->local_rank_, comm->local_size_);
  if (!st.ok()) return st;
  COLLX_INFO(INIT, "communicator '%s' ready: rank %d of %d (local %d of %d), launcher %s",
             comm->name_.c_str(), comm->rank_, comm->size_, comm->local_rank_, comm->local_size_,
             job.source.c_str());
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::init(const JobConfig& job, const CommSettings& settings, std::shared_ptr<Store> store,
                          std::string prefix, int rank, int size) {
  LogRankScope log_rank(rank);
  settings_ = settings;
  store_ = std::move(store);
  prefix_ = std::move(prefix);
  hosts_store_ = !job.store && size > 1 && hosts_tcp_store(job.store_addr);
  rank_ = rank;
  size_ = size;
  const Deadline deadline = Deadline::after_ms(settings_.timeout_ms);
  auto bootstrap = std::make_unique<StoreBootstrap>(store_, prefix_, rank_, size_);

  // Every rank learns every rank's host, so it knows which peers share its host.
  HostIdentity me;
  Status st = this_host(job.rank, &me);
  if (!st.ok()) return st.with_context("creating communicator '" + name_ + "': ");
  std::vector<std::vector<uint8_t>> hosts;
  st = bootstrap->allgather("host", encode_host_identity(me), &hosts, deadline);
  if (!st.ok()) return st.with_context("creating communicator '" + name_ + "': ");
  bool single_host = true;
  local_rank_ = 0;
  local_size_ = 0;
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < size_; ++r) {
    HostIdentity peer;
    COLLX_RETURN_IF_ERROR(decode_host_identity(hosts[static_cast<size_t>(r)], &peer));
    rank_hosts_.push_back(peer);
    host_of_rank.push_back(std::to_string(peer.host_hash));
    if (peer.host_hash == me.host_hash) {
      if (r < rank_) ++local_rank_;
      ++local_size_;
    } else {
      single_host = false;
    }
  }
  if (job.local_rank >= 0 && size_ == job.world_size && (job.local_rank != local_rank_ || job.local_size != local_size_)) {
    COLLX_INFO(INIT, "launcher says local rank %d of %d; host identities say %d of %d (using the latter)",
               job.local_rank, job.local_size, local_rank_, local_size_);
  }

  use_ring_order(host_of_rank);
  st = create_transport(bootstrap.get(), single_host, deadline);
  if (!st.ok()) return st.with_context("creating communicator '" + name_ + "': ");
  plan_hierarchy(host_of_rank);  // comm_hierarchy.cc (after create_transport: it extends model_)
  COLLX_RETURN_IF_ERROR(flight_.init(name_, rank_, size_, job.rank, job.store_addr,  // flight recorder
                                     transport_ ? transport_->name() : "none"));
  bootstrap->cleanup().ignore();  // best effort: leftover keys only cost store memory
  st = setup_bound_device_route(deadline);  // comm_device.cc: NCCL for a device-bound communicator
  if (!st.ok()) return st.with_context("creating communicator '" + name_ + "': ");
  return Status::Ok();
}

Status Communicator::split(int color, int key, std::shared_ptr<Communicator>* out) {
  LogRankScope log_rank(rank_);
  if (color < 0 && color != COLLX_SPLIT_NOCOLOR) {
    return make_status(COLLX_ERR_INVALID_ARG, "comm_split: color %d is negative (use COLLX_SPLIT_NOCOLOR "
                       "to opt out)", color);
  }
  // Everyone learns everyone's (color, key) through an all-gather on this communicator.
  std::vector<int32_t> mine = {color, key};
  std::vector<int32_t> all(static_cast<size_t>(size_) * 2);
  CollCall gather;
  gather.coll = COLLX_COLL_ALLGATHER;
  gather.sendbuf = mine.data();
  gather.recvbuf = all.data();
  gather.count = 2;
  gather.datatype = COLLX_INT32;
  Status st = run(gather);
  if (!st.ok()) return st.with_context("comm_split: ");
  const uint64_t child = ++children_;
  if (color == COLLX_SPLIT_NOCOLOR) {
    out->reset();
    return Status::Ok();
  }
  struct Member {
    int key;
    int parent_rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < size_; ++r) {
    if (all[static_cast<size_t>(r) * 2] == color) members.push_back({all[static_cast<size_t>(r) * 2 + 1], r});
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.parent_rank < b.parent_rank;
  });
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].parent_rank == rank_) new_rank = static_cast<int>(i);
  }
  std::shared_ptr<Communicator> comm(new Communicator());
  comm->job_ = job_;
  comm->name_ = name_ + string_printf(".split%llu.c%d", static_cast<unsigned long long>(child), color);
  std::string prefix = prefix_ + string_printf("/s%llu/c%d", static_cast<unsigned long long>(child), color);
  st = comm->init(job_, settings_, store_, prefix, new_rank, static_cast<int>(members.size()));
  if (!st.ok()) return st;
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::dup(std::shared_ptr<Communicator>* out) { return split(0, rank_, out); }

Status Communicator::health() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(state_mutex_);
  return failure_;
}

Status Communicator::unusable() const {
  Status failure = health();
  return Status(failure.code(), "communicator '" + name_ + "' failed earlier and cannot be used (destroy "
                                    "it and create a new one); first error: " + failure.message());
}

void Communicator::fail(const Status& status) {
  bool first = false;  // flight recorder
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (!failed_.load(std::memory_order_relaxed)) {
      failure_ = status;
      failed_.store(true, std::memory_order_release);
      first = true;  // flight recorder
    }
  }
  // flight recorder: dump on a timeout here, and on a peer's (its failure reaches us as
  // COLLX_ERR_REMOTE whose remote code, set by the transport from the peer's notice, is the
  // timeout; often before our own deadline passes), so every rank of a hang leaves a record,
  // as torch's store-signalled dumps do.
  const bool timed_out = status.code() == COLLX_ERR_TIMEOUT ||
                         (status.code() == COLLX_ERR_REMOTE && status.remote_code() == COLLX_ERR_TIMEOUT);
  if (first) flight_.record_failure(status);
  if (first && timed_out) flight_.dump_after_timeout();
  COLLX_WARN(COLL, "communicator '%s' failed: %s: %s", name_.c_str(), status_name(status.code()),
             status.message().c_str());
  if (transport_ && status.code() != COLLX_ERR_ABORTED) transport_->poison(status, /*notify_peers=*/true);
}

void Communicator::abort() {
  aborted_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (!failed_.load(std::memory_order_relaxed)) {
      failure_ = make_status(COLLX_ERR_ABORTED, "collx_comm_abort was called on rank %d", rank_);
      failed_.store(true, std::memory_order_release);
    }
  }
  if (transport_) transport_->abort();
  abort_hierarchy();  // comm_hierarchy.cc
}

void Communicator::destroy() {
  LogRankScope log_rank(rank_);
  const Deadline deadline = Deadline::after_ms(settings_.timeout_ms);
  if (!executor_.drain(deadline)) {
    COLLX_WARN(COLL, "destroy of '%s': queued operations did not finish by the timeout; aborting them",
               name_.c_str());
    abort();
    executor_.drain(Deadline::after_ms(2000));
  }
  executor_.stop();
  // Sends waiting for their staging copy: posted before the transport closes, so a peer
  // still gets what the calls before destroy sent (bounded as the executor above).
  if (!deferred_sends_.drain(deadline.min(Deadline::after_ms(5000)))) {
    COLLX_WARN(COLL, "destroy of '%s': sends waiting for their copy to host staging were not posted in time; "
               "dropping them", name_.c_str());
  }
  deferred_sends_.stop(make_status(COLLX_ERR_INVALID_USAGE, "the communicator was destroyed before the send was posted"));
  flight_.close();  // flight recorder: unregister, write the trace
  {
    std::lock_guard<std::mutex> lock(detached_mutex_);
    for (auto& request : detached_) {
      transport::Request* tx = &request->tx_request_;
      if (transport_ && !tx->done()) transport_->cancel(&tx, 1);
    }
    detached_.clear();
  }
  destroy_hierarchy();  // comm_hierarchy.cc: internal children go first
  if (transport_) {
    // Leaving peers a GOODBYE lets them say "rank R left" instead of "rank R died".
    transport_->close(failed_.load() ? Deadline::after_ms(0) : deadline.min(Deadline::after_ms(5000)));
  }
  wait_for_bootstrap_stragglers();
}

void Communicator::wait_for_bootstrap_stragglers() {
  if (!hosts_store_ || !store_) return;
  // A rank can finish creating the communicator, fail or finish its work and destroy it while
  // another rank is still reading its peers' addresses from the store (a slower start, a
  // loaded machine). When this process hosts the store, exiting now would leave that rank
  // with "the store server closed the connection" instead of the real outcome. Bounded: a
  // rank that never arrives (killed mid-creation) costs at most 30 s here.
  constexpr int64_t kMaxWaitMs = 30000;
  const Deadline deadline = Deadline::after_ms(settings_.timeout_ms).min(Deadline::after_ms(kMaxWaitMs));
  Status st = StoreBootstrap::wait_until_cleaned(store_.get(), prefix_, size_, deadline);
  if (!st.ok()) {
    COLLX_WARN(INIT, "destroy of '%s': this process hosts the store, and a rank may still need it to finish "
               "creating the communicator; leaving anyway: %s", name_.c_str(), st.message().c_str());
  }
}

Communicator::~Communicator() = default;

void Communicator::set_last_error(const Status& status) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  last_error_ = status.ok() ? std::string() : std::string(status_name(status.code())) + ": " + status.message();
}

const char* Communicator::last_error() const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return last_error_.c_str();
}

void Communicator::detach(std::shared_ptr<RequestImpl> request) {
  std::lock_guard<std::mutex> lock(detached_mutex_);
  // Drop the ones that finished meanwhile, keep the rest alive for the transport.
  detached_.erase(std::remove_if(detached_.begin(), detached_.end(),
                                 [](const std::shared_ptr<RequestImpl>& r) {
                                   // A send not posted yet has a transport request that looks done.
                                   return r->tx_request_.done() && !(r->deferred_ && !r->deferred_->settled());
                                 }),
                  detached_.end());
  detached_.push_back(std::move(request));
}

}  // namespace collx
