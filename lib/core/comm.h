// The communicator: a group of ranks, its transport, its settings, its sequence of
// collectives and its health. The C API (lib/api) is a thin shell over this class.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "collx/collx.h"
#include "lib/common/scratch.h"
#include "lib/common/status.h"
#include "lib/core/comm_p2p_device.h"
#include "lib/core/executor.h"
#include "lib/core/flight_recorder.h"  // flight recorder
#include "lib/core/host_identity.h"
#include "lib/core/p2p_deferred_sends.h"
#include "lib/core/launch_env.h"
#include "lib/core/selection.h"
#include "lib/core/tune_file.h"
#include "lib/core/store_bootstrap.h"
#include "backends/backend.h"  // whole-collective device routes (NCCL, CUDA IPC)
#include "transports/transport.h"

namespace collx {

// One call as the user made it (after the C API read its arguments and options). Datatype,
// op and algorithm stay raw integers until validate() accepted them: a C caller may pass any
// value, and an out-of-range value must not be held in a C++ enum (undefined behaviour).
struct CollCall {
  collx_coll_t coll = COLLX_COLL_ALLREDUCE;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  int32_t datatype = COLLX_FLOAT32;
  int32_t op = COLLX_SUM;
  int root = 0;   // broadcast, reduce
  int peer = -1;  // send, recv
  int tag = 0;    // send, recv
  int32_t algorithm = COLLX_ALGO_AUTO;
  int mem_kind = COLLX_MEM_AUTO;
  int64_t timeout_ms = -1;  // -1: the communicator's
  double premul_scalar = 1.0;
  void* stream = nullptr;  // cudaStream_t of device buffers (lib/core/comm_device.cc)
  // v-collectives: the caller's arrays, copied (displs filled in, packed, when NULL) so a
  // nonblocking call does not read them after it returned. counts/displs: recvcounts and
  // displs of all-gatherv, gatherv (root) and all-to-allv (rdispls), recvcounts with packed
  // offsets of reduce-scatterv, sendcounts and displs of scatterv (root). send_counts and
  // send_displs: all-to-allv's sendcounts and sdispls.
  std::vector<size_t> counts, displs;
  std::vector<size_t> send_counts, send_displs;
};

// Settings a communicator reads once at creation (children inherit them).
struct CommSettings {
  int64_t timeout_ms = -1;
  size_t chunk_bytes = 512 << 10;
  uint32_t transports = COLLX_TRANSPORT_TCP;
  AlgorithmSelector selector;
  TunedCosts tuned;             // from COLLX_TUNE_FILE (empty: built-in defaults)
  std::string tune_file;
  bool nccl_check_calls = true;  // COLLX_NCCL_CHECK_CALLS (comm_device.cc)
  static Status from_environment(const JobConfig& job, CommSettings* out);
};

class Communicator;
class DeviceState;
struct Hierarchy;  // lib/core/comm_hierarchy.h

// COLLX_BIND (none | numa | core): pins the calling thread to its local rank's CPUs, once
// per process (comm_binding.cc). OK without doing anything when unset or "none".
Status apply_cpu_binding(int local_rank, int local_size);  // device-buffer state (lib/core/comm_device.cc)

// The object behind collx_request_t. Shared by the user's handle and the code completing it.
class RequestImpl {
 public:
  explicit RequestImpl(std::shared_ptr<Communicator> comm, bool is_p2p)
      : comm_(std::move(comm)), is_p2p_(is_p2p) {}

  // Collective requests: set by the executor when the operation ends.
  void finish(Status status);
  // Non-blocking check; drives progress for point-to-point requests.
  bool test(Status* status);
  // Wait up to `wait_deadline`; returns IN_PROGRESS when that passes first.
  Status wait(Deadline wait_deadline);

  transport::Request& transport_request() { return tx_request_; }
  Deadline& op_deadline() { return op_deadline_; }
  std::string& context() { return context_; }
  const std::shared_ptr<Communicator>& comm() const { return comm_; }
  // Point-to-point: a send not posted yet is never posted after this (a group abandoned).
  void cancel_deferred_post() {
    if (deferred_) deferred_->cancel();
  }

 private:
  friend class Communicator;
  std::shared_ptr<Communicator> comm_;
  const bool is_p2p_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  Status status_;
  // Point-to-point: the transport request itself, its deadline and its description.
  transport::Request tx_request_;
  Deadline op_deadline_ = Deadline::never();
  std::string context_;
  uint64_t fr_id_ = 0;  // flight recorder record of a point-to-point request
  std::unique_ptr<P2pStaged> staged_;  // point-to-point on device buffers (comm_p2p_device.h)
  // A send that the poster posts later (p2p_deferred_sends.h); reset once it was posted.
  std::shared_ptr<DeferredSends::Ticket> deferred_;
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  ~Communicator();

  // World communicator for this rank of the job.
  static Status create(const JobConfig& job, std::shared_ptr<Communicator>* out);
  // MPI_Comm_split semantics; *out is null for COLLX_SPLIT_NOCOLOR.
  Status split(int color, int key, std::shared_ptr<Communicator>* out);
  Status dup(std::shared_ptr<Communicator>* out);
  // ULFM-style shrink (lib/core/comm_shrink.cc): the ranks that call it agree through the
  // store on who is left and form a new communicator of them. `timeout_ms` < 0: the
  // communicator's timeout.
  Status shrink(int64_t timeout_ms, std::shared_ptr<Communicator>* out);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& name() const { return name_; }

  // Blocking collective (also barrier). Validates, then runs in order with earlier
  // nonblocking collectives. By value: prepare() resolves the copy's memory kind.
  Status run(CollCall call);
  // Nonblocking collective: queued on the executor (or on the caller's stream).
  Status submit(CollCall call, std::shared_ptr<RequestImpl>* out);
  // Point-to-point.
  Status send_recv(const CollCall& call);
  Status post_p2p(const CollCall& call, std::shared_ptr<RequestImpl>* out);

  // Text explaining the automatic choice for (coll, count, datatype): every candidate with
  // its predicted time, the one chosen and why (collx_explain). Arguments checked by
  // check_choice().
  Status explain(collx_coll_t coll, size_t count, int32_t datatype, std::string* out) const;
  const char* transport_name() const { return transport_ ? transport_->name() : "none"; }
  // The arguments of a question about the choice (collx_select_algorithm, collx_explain),
  // raw values: a known collective and datatype, and `forced` an algorithm that implements
  // it and can run here (validate.cc). `who` prefixes the message.
  Status check_choice(const char* who, collx_coll_t coll, int32_t datatype, int32_t forced) const;
  // The algorithm for (coll, count elements, datatype): `forced` unless AUTO, else the first
  // COLLX_ALGO rule that matches, else the cost model. Arguments already checked (by
  // validate() for calls, check_choice() for questions); never fails, never communicates.
  collx_algorithm_t choose_algorithm(collx_coll_t coll, size_t count, int32_t datatype, int32_t forced) const;

  // Grouped calls (comm_group.cc): the check of a call recorded inside a group (arguments,
  // health), made when it is recorded so a bad argument is reported by the call itself.
  // *recorded = the call to keep: its memory kind resolved (COLLX_MEM_AUTO detected once).
  Status check_recorded(const CollCall& call, CollCall* recorded) const;

  // Any thread, never blocks.
  void abort();
  // Orderly teardown: wait for queued operations, tell peers, close.
  void destroy();
  // In the process hosting the store, destroy() returns only once no rank is still reading
  // this communicator's bootstrap keys (or after at most 30 s): a rank 0 that fails or
  // finishes first must not take the store from a rank still inside collx_comm_create.
  void wait_for_bootstrap_stragglers();

  // OK while healthy, else the first fatal status (with its message).
  Status health() const;
  // Writes the process's flight record into `dir` ("" = COLLX_FR_DIR).
  Status dump_flight_record(const std::string& dir) const {
    return dump_flight_records(dir.empty() ? flight_.dump_dir() : dir);
  }
  // The message of the last failed call on this communicator (collx_last_error): any thread
  // may read it. The pointer stays valid until the next set_last_error or the destructor.
  void set_last_error(const Status& status);
  const char* last_error() const;

 private:
  Communicator() = default;
  friend class RequestImpl;
  friend class GroupBatch;  // comm_group.cc: issues a closed group's calls on this communicator

  Status init(const JobConfig& job, const CommSettings& settings, std::shared_ptr<Store> store,
              std::string prefix, int rank, int size);
  // Picks the transport for this communicator's ranks (comm_transport.cc) and creates it.
  Status create_transport(transport::Bootstrap* bootstrap, bool single_host, Deadline deadline);
  void use_cost_model();  // model_ for transport_, tuned or default
  void use_ring_order(const std::vector<std::string>& host_of_rank);  // ring_order_, ring_position_
  std::string nearest_interface(const std::string& route_ip) const;  // TransportSetup::pick_interface
  // Every argument rule of a call, once (validate.cc); the memory-kind rule through
  // device_check() (comm_device.cc).
  Status validate(const CollCall& call) const;
  // `forced` (a raw collx_algorithm_t) implements `coll` by the registry and what it needs
  // holds on this communicator (shared boards).
  Status check_forced(const char* who, collx_coll_t coll, int32_t forced) const;
  Status validate_v(const CollCall& call) const;  // v-collectives (validate_v.cc)
  // Accepts a collective: validates *call, resolves its memory kind (resolve_mem_kind: the one
  // pointer probe of the call; every later step reads call->mem_kind) and fills *desc, whose
  // algorithm is the call's one choice (chosen_algorithm), carried to the dispatch.
  Status prepare(CollCall* call, transport::OpDesc* desc) const;
  // The algorithm for an accepted call, through the one algorithm cache (LastChoice).
  collx_algorithm_t chosen_algorithm(const CollCall& call) const;
  // Runs one collective on the calling thread (caller or executor). Poisons on failure.
  Status execute(const CollCall& call, const transport::OpDesc& desc);
  // Queues execute() on the executor; `request` finishes with its status, also when it threw.
  // A task that cannot be queued fails the communicator (its sequence number is spent).
  Status enqueue(const CollCall& call, const transport::OpDesc& desc, const std::shared_ptr<RequestImpl>& request);
  Status dispatch(const CollCall& call, const transport::OpDesc& desc, Deadline deadline);
  Status run_algorithm(const algo::CollArgs& args) const;
  // Hierarchical all-reduce (comm_hierarchy.cc): layout planned by init, internal child
  // communicators made by the first call, aborted and destroyed with this one.
  void plan_hierarchy(const std::vector<std::string>& host_of_rank);
  Status allreduce_hierarchical(const algo::Context& ctx, const algo::CollArgs& args) const;
  void abort_hierarchy();
  void destroy_hierarchy();
  // CUDA device buffers: NCCL, CUDA IPC or staging (lib/core/comm_device.cc).
  Status dispatch_device(const CollCall& call, const transport::OpDesc& desc, Deadline deadline);
  // A nonblocking collective on device buffers that NCCL cannot take is ordered on the
  // caller's stream at once: a host function and a stream-side wait are queued there, the
  // rest runs on the executor when the stream reaches it (comm_device_async.cc). *gated:
  // CUDA IPC may take it, so the executor runs the whole device route on collx's side stream
  // meanwhile; else the staging copies are queued on the caller's stream too.
  bool stream_ordered(const CollCall& call, bool* gated) const;
  // The executor's own stream on `device` (created on first use, destroyed with the state).
  Status side_stream(int device, void** stream);
  Status enqueue_stream_ordered(const CollCall& call, const transport::OpDesc& desc,
                                const std::shared_ptr<RequestImpl>& request, bool gated);
  // Its staged route for the v-collectives (layout planned by staging_plan.h).
  Status stage_v(DeviceState& d, const CollCall& call, const transport::OpDesc& desc, Deadline deadline);
  // NCCL set-up (collective); COLLX_ERR_UNSUPPORTED from NCCL marks it refused, logged.
  Status setup_nccl(DeviceState& d, int device, Deadline deadline);
  // End of init(): a communicator bound to a device (config->device) with nccl allowed sets
  // NCCL up now, so its point-to-point route is fixed before the first call (comm_device.cc).
  Status setup_bound_device_route(Deadline deadline);
  // The device holding `buf`, which must be the bound one (config->device) when there is one.
  Status buffer_device(const void* buf, int* device) const;
  // Point-to-point on device buffers over NCCL (nccl_p2p_ set): enqueued on the call's stream,
  // or kept for the open batch (begin/end_nccl_p2p_batch) of the calling thread.
  Status post_p2p_nccl(const CollCall& call);
  // A group's point-to-point calls on this thread are kept from begin to end and enqueued as
  // one NCCL group by end (nothing when the communicator's p2p does not use NCCL; dropped
  // when !enqueue: the group failed before all were posted).
  void begin_nccl_p2p_batch();
  Status end_nccl_p2p_batch(Deadline deadline, bool enqueue);
  // Refuses a device collective on a stream capturing a CUDA graph unless it can take the
  // NCCL route; called before the call's sequence number is spent, so the communicator stays
  // usable (comm_device.cc).
  Status capture_check(const CollCall& call) const;
  // The algorithms' view of this communicator's host transport, in world rank order.
  algo::Context host_context() const;
  // Marks the communicator failed; peers are told unless the failure came from them.
  void fail(const Status& status);
  Status unusable() const;
  std::string context_of(const transport::OpDesc& desc) const;
  int64_t timeout_for(int64_t call_timeout_ms) const;  // the call's, else the communicator's (< 0: none)
  Deadline deadline_for(int64_t call_timeout_ms) const;
  Status wait_p2p(RequestImpl* request, Deadline wait_deadline);
  // Hands a send to deferred_sends_: posted once the request's staging copy ended (or at
  // once after the earlier deferred sends to `peer` and `tag`). comm_p2p.cc.
  Status defer_send(const std::shared_ptr<RequestImpl>& request, int peer, uint64_t tag, const void* buf,
                    size_t bytes, const transport::OpDesc& desc);

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string name_;
  JobConfig job_;
  CommSettings settings_;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  // This process hosts the TCP store (rank 0 of the job): destroy() keeps it up until every
  // rank has finished reading its bootstrap keys (wait_for_bootstrap_stragglers).
  bool hosts_store_ = false;
  std::unique_ptr<transport::Transport> transport_;
  CostModel model_;             // of transport_, from the tune file or the defaults
  // Ring order grouped by host (lib/topo ring_order_by_host): position -> rank. Empty when
  // it is the rank order (one host, or ranks already placed host by host).
  std::vector<int> ring_order_;
  int ring_position_ = 0;
  // The one algorithm cache: the last choice chosen_algorithm() made, for (coll, count,
  // datatype, forced), the only inputs of choose_algorithm() that vary between calls.
  // Training loops repeat the same call, and the model's predictions cost more than the rest
  // of a small call. Only the thread issuing the communicator's calls reads and writes it
  // (prepare(), a closed group's planning).
  struct LastChoice {
    bool valid = false;
    collx_coll_t coll = COLLX_COLL_ALLREDUCE;
    size_t count = 0;
    int32_t datatype = 0, forced = 0;
    collx_algorithm_t algorithm = COLLX_ALGO_AUTO;
  };
  mutable LastChoice last_choice_;
  // The last call validate() accepted in prepare(), as it saw it: a repeat skips validation
  // (not the choice, which LastChoice caches). Same single-thread rule as last_choice_.
  struct LastValidated {
    bool valid = false;
    collx_coll_t coll = COLLX_COLL_ALLREDUCE;
    const void* sendbuf = nullptr;
    void* recvbuf = nullptr;
    size_t count = 0;
    int32_t datatype = 0, op = 0, algorithm = 0;
    int root = 0, peer = 0, tag = 0, mem_kind = 0;
  };
  mutable LastValidated last_validated_;
  uint64_t coll_seq_ = 0;       // last sequence number handed out
  uint64_t children_ = 0;       // split/dup counter (prefixes of children)
  uint64_t shrinks_ = 0;        // shrink counter (prefixes of shrink agreements)
  std::vector<HostIdentity> rank_hosts_;  // every rank's host and pid, from init (shrink)
  mutable ScratchPool core_scratch_;  // premul copies
  mutable ScratchPool algo_scratch_;  // algorithms' temporaries
  FlightRecorder flight_;  // last operations, dumped on a timeout (declared before the executor, whose tasks use it)
  Executor executor_;
  std::shared_ptr<DeviceState> device_;  // lib/core/comm_device.cc; made by the first device call
  // Device point-to-point goes over NCCL: set by setup_bound_device_route() during init only,
  // never changed after (so every rank's route is known before the first call).
  backend::Backend* nccl_p2p_ = nullptr;
  // Group p2p (comm_group.cc): NCCL operations kept until the batch ends, one NCCL group.
  std::mutex nccl_batch_mu_;
  std::thread::id nccl_batch_owner_;
  bool nccl_batch_open_ = false;
  std::vector<backend::DeviceOp> nccl_batch_;
  P2pStagingPool p2p_staging_;           // point-to-point on device buffers (comm_p2p_device.h)
  P2pStagingPool async_staging_;         // stream-ordered nonblocking collectives (comm_device_async.cc)
  // Sends posted once their staging copy ended, and the sends behind them (p2p_deferred_sends.h).
  // Stopped by destroy() (its entries own requests, which own this communicator).
  DeferredSends deferred_sends_;
  std::shared_ptr<Hierarchy> hierarchy_;  // lib/core/comm_hierarchy.cc; null: one host

  mutable std::mutex state_mutex_;
  Status failure_;  // first fatal status
  std::atomic<bool> failed_{false};
  std::atomic<bool> aborted_{false};
  std::string last_error_;
  // Point-to-point requests the user freed before they completed.
  std::vector<std::shared_ptr<RequestImpl>> detached_;
  std::mutex detached_mutex_;

 public:
  void detach(std::shared_ptr<RequestImpl> request);
};

}  // namespace collx
