// Running a closed group (comm_group.h): planning and fusing each communicator's calls,
// posting the point-to-point calls, running the collectives, collecting the statuses.
#include "lib/core/comm_group.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "algorithms/registry.h"
#include "lib/common/exception_status.h"
#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/core/comm_device.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

bool is_p2p(const CollCall& call) { return call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV; }

// The largest fused message `algorithm` still reduces element by element in one fixed order
// of the ranks, so that each member gets the very bits a call of its own gets (the registry's
// fixed_order_bytes; 0: never fused), capped by COLLX_GROUP_FUSE_BYTES.
uint64_t fused_cap(collx_algorithm_t algorithm, uint64_t fuse_bytes) {
  const algo::Implementation* entry = algo::find_implementation(algorithm, COLLX_COLL_ALLREDUCE);
  return entry ? std::min<uint64_t>(fuse_bytes, entry->fixed_order_bytes) : 0;
}

// The count field of a fused message's OpDesc: FNV-1a over the number of members and their
// counts in order, so ranks that packed other calls, or the same calls in another order, differ.
uint64_t member_counts_hash(const std::vector<size_t>& counts) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(counts.size());
  for (size_t c : counts) mix(c);
  return h;
}

}  // namespace

Status group_fuse_bytes(uint64_t* out) { return setting_size(SettingId::GROUP_FUSE_BYTES, out); }

Status Communicator::check_recorded(const CollCall& call, CollCall* recorded) const {
  LogRankScope log_rank(rank_);
  if (failed_.load(std::memory_order_acquire)) return unusable();
  *recorded = call;
  // Point-to-point too: device buffers are checked as for collectives.
  COLLX_RETURN_IF_ERROR(validate(call));
  // Planning and running the group read the kind resolved here (as prepare() does).
  resolve_mem_kind(recorded);
  return capture_check(*recorded);
}

// The calls of one communicator in a closed group.
class GroupBatch {
 public:
  GroupBatch(Communicator* comm, size_t group_size) : comm_(comm), group_size_(group_size) {}
  GroupBatch(const GroupBatch&) = delete;
  GroupBatch& operator=(const GroupBatch&) = delete;

  Communicator* comm() const { return comm_; }
  void add(size_t index, const GroupCall* call) {
    members_.push_back(Member{index, call});
    statuses_.push_back(Status::Ok());
  }

  // Fuses and prepares (validation, algorithm) every collective; issues nothing.
  Status plan(uint64_t fuse_bytes);
  // Posts every receive, then every send, nonblocking. On a failure the ones posted are
  // cancelled and nothing more is posted.
  Status post_p2p();
  // The group failed before its collectives started (`why`): cancels the point-to-point
  // calls posted and finishes every recorded request with `why` (or its own failure).
  void abandon(const Status& why);
  // Numbers the collectives and runs them, on this thread when `here` and no earlier
  // nonblocking collective is queued, else as one task of the communicator's executor.
  Status start_collectives(bool here);
  // Waits for the collectives and the point-to-point calls, finishes the recorded requests and
  // returns the first failure (the cause, not the calls it kept from running).
  Status finish();

 private:
  struct Member {
    size_t index;  // position in the group
    const GroupCall* call;
  };
  // One collective issued: a recorded call, or several all-reduces fused into one message.
  struct Item {
    std::vector<size_t> members;  // into members_
    CollCall call;
    transport::OpDesc desc;
    Deadline deadline = Deadline::never();
    bool fusable = false;
    collx_algorithm_t algorithm = COLLX_ALGO_AUTO;  // fusable: what each member runs alone
    size_t bytes = 0;
    std::vector<char> packed;  // fused: the members' vectors back to back (reduced in place)
  };
  struct P2p {
    size_t member;
    std::shared_ptr<RequestImpl> request;
  };

  bool fusable(const CollCall& call, uint64_t fuse_bytes, collx_algorithm_t* algorithm) const;
  size_t bucket_for(const CollCall& call, collx_algorithm_t algorithm, size_t bytes, uint64_t fuse_bytes) const;
  Status finalize(Item* item);
  void run_items();
  Status run_item(Item* item);
  std::string label(size_t member) const;
  std::string label(const Item& item) const;
  void record_failure(size_t member, const Status& status);

  Communicator* comm_;
  size_t group_size_;
  std::vector<Member> members_;
  std::vector<Item> items_;
  std::vector<P2p> p2p_;
  std::vector<Status> statuses_;  // per member
  Status cause_;                  // first failure
  size_t cause_member_ = 0;
  std::shared_ptr<RequestImpl> queued_;  // set when the collectives run on the executor
};

std::string GroupBatch::label(size_t member) const {
  const CollCall& c = members_[member].call->call;
  std::string what = coll_name(c.coll);
  if (is_p2p(c)) what += string_printf(c.coll == COLLX_COLL_SEND ? " to rank %d, tag %d" : " from rank %d, tag %d", c.peer, c.tag);
  return string_printf("call %zu of %zu in the group (%s of %zu elements on rank %d of '%s')",
                       members_[member].index + 1, group_size_, what.c_str(), c.count, comm_->rank_,
                       comm_->name_.c_str());
}

std::string GroupBatch::label(const Item& item) const {
  if (item.members.size() == 1) return label(item.members[0]);
  std::string calls;
  for (size_t m : item.members) calls += (calls.empty() ? "" : ", ") + std::to_string(members_[m].index + 1);
  return string_printf("calls %s of %zu in the group (%zu all-reduces fused into one message on rank %d of '%s')",
                       calls.c_str(), group_size_, item.members.size(), comm_->rank_, comm_->name_.c_str());
}

void GroupBatch::record_failure(size_t member, const Status& status) {
  statuses_[member] = status;
  if (cause_.ok()) {
    cause_ = status;
    cause_member_ = member;
  }
}

bool GroupBatch::fusable(const CollCall& call, uint64_t fuse_bytes, collx_algorithm_t* algorithm) const {
  if (fuse_bytes == 0 || call.coll != COLLX_COLL_ALLREDUCE || call.count == 0) return false;
  const uint64_t bytes = static_cast<uint64_t>(call.count) * datatype_size(call.datatype);
  if (bytes > fuse_bytes || device_buffers(call)) return false;
  // The call's one choice (validated when recorded): the one cache prepare() reads too.
  *algorithm = comm_->chosen_algorithm(call);
  return bytes <= fused_cap(*algorithm, fuse_bytes);
}

// The open fused item `call` joins, or items_.size() for a new one.
size_t GroupBatch::bucket_for(const CollCall& call, collx_algorithm_t algorithm, size_t bytes,
                              uint64_t fuse_bytes) const {
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    if (it.fusable && it.call.datatype == call.datatype && it.call.op == call.op &&
        std::memcmp(&it.call.premul_scalar, &call.premul_scalar, sizeof call.premul_scalar) == 0 &&
        it.algorithm == algorithm && it.bytes + bytes <= fused_cap(algorithm, fuse_bytes)) {
      return i;
    }
  }
  return items_.size();
}

Status GroupBatch::plan(uint64_t fuse_bytes) {
  for (size_t m = 0; m < members_.size(); ++m) {
    const CollCall& call = members_[m].call->call;
    if (is_p2p(call)) {
      p2p_.push_back(P2p{m, nullptr});
      continue;
    }
    collx_algorithm_t algorithm = COLLX_ALGO_AUTO;
    const bool fuse = fusable(call, fuse_bytes, &algorithm);
    const size_t bytes = fuse ? call.count * datatype_size(call.datatype) : 0;
    size_t i = fuse ? bucket_for(call, algorithm, bytes, fuse_bytes) : items_.size();
    if (i == items_.size()) {
      items_.emplace_back();
      items_.back().call = call;
      items_.back().fusable = fuse;
      items_.back().algorithm = algorithm;
    }
    Item& item = items_[i];
    item.members.push_back(m);
    item.bytes += bytes;
    item.deadline = item.deadline.min(comm_->deadline_for(call.timeout_ms));
  }
  for (Item& item : items_) COLLX_RETURN_IF_ERROR(finalize(&item));
  return Status::Ok();
}

Status GroupBatch::finalize(Item* item) {
  const bool fused = item->members.size() > 1;
  if (fused) {
    item->packed.resize(item->bytes);
    item->call.sendbuf = item->packed.data();
    item->call.recvbuf = item->packed.data();
    item->call.count = item->bytes / datatype_size(item->call.datatype);
    // The members' choice, carried: the packed message must not be chosen for again by its
    // own size (another algorithm would reduce the members in another order).
    item->call.algorithm = item->algorithm;
  }
  Status st = comm_->prepare(&item->call, &item->desc);
  if (!st.ok()) return st.with_context(label(*item) + ": ");
  if (fused) {
    std::vector<size_t> counts;
    for (size_t m : item->members) counts.push_back(members_[m].call->call.count);
    item->desc.count = member_counts_hash(counts);
    item->desc.root = fused_root(item->members.size());
  }
  return Status::Ok();
}

Status GroupBatch::post_p2p() {
  // Device calls over NCCL are kept and enqueued below as one NCCL group (comm_p2p_nccl.cc).
  comm_->begin_nccl_p2p_batch();
  for (collx_coll_t pass : {COLLX_COLL_RECV, COLLX_COLL_SEND}) {
    for (P2p& p : p2p_) {
      const CollCall& call = members_[p.member].call->call;
      if (call.coll != pass) continue;
      Status st = comm_->post_p2p(call, &p.request);
      if (!st.ok()) {
        comm_->end_nccl_p2p_batch(Deadline::after_ms(0), /*enqueue=*/false).ignore();
        st = st.with_context(label(p.member) + ": ");
        record_failure(p.member, st);
        return st;
      }
    }
  }
  Status st = comm_->end_nccl_p2p_batch(comm_->deadline_for(-1), /*enqueue=*/true);
  if (!st.ok() && !p2p_.empty()) record_failure(p2p_.front().member, st);
  return st;
}

void GroupBatch::abandon(const Status& why) {
  for (P2p& p : p2p_) {
    if (!p.request) continue;
    p.request->cancel_deferred_post();
    transport::Request* tx = &p.request->transport_request();
    if (!tx->done()) comm_->transport_->cancel(&tx, 1);
    p.request.reset();
  }
  for (size_t m = 0; m < members_.size(); ++m) {
    if (statuses_[m].ok()) statuses_[m] = why;
    if (members_[m].call->request) members_[m].call->request->finish(statuses_[m]);
  }
}

Status GroupBatch::start_collectives(bool here) {
  if (items_.empty()) return Status::Ok();
  for (Item& item : items_) item.desc.seq = ++comm_->coll_seq_;
  if (here && comm_->executor_.idle()) {
    run_items();
    return Status::Ok();
  }
  queued_ = std::make_shared<RequestImpl>(comm_->shared_from_this(), /*is_p2p=*/false);
  try {
    comm_->executor_.submit(
        [this] {
          run_items();
          queued_->finish(Status::Ok());
        },
        [this](const Status& status) {
          // run_items threw past execute()'s own guard: the communicator is out of step.
          for (const Item& item : items_) {
            for (size_t m : item.members) {
              if (statuses_[m].ok()) record_failure(m, status.with_context(label(item) + ": "));
            }
          }
          queued_->finish(status);
          comm_->fail(status);
        },
        comm_->rank_);
  } catch (...) {
    Status st = current_exception_status("queueing a group's collectives");
    comm_->fail(st);
    queued_.reset();
    for (const Item& item : items_) {
      for (size_t m : item.members) record_failure(m, st.with_context(label(item) + ": "));
    }
    return st;
  }
  return Status::Ok();
}

void GroupBatch::run_items() {
  LogRankScope log_rank(comm_->rank_);
  Status failed;  // the first item's failure: the later items are not run
  for (Item& item : items_) {
    if (!failed.ok()) {
      for (size_t m : item.members) statuses_[m] = failed.with_context(label(m) + ": not run: ");
      continue;
    }
    Status st = run_item(&item);
    if (st.ok()) continue;
    failed = st.with_context(label(item) + ": ");
    for (size_t m : item.members) record_failure(m, failed);
  }
}

Status GroupBatch::run_item(Item* item) {
  // The deadline runs from the start of collx_group_end, not from the start of this call.
  if (!item->deadline.is_never()) item->call.timeout_ms = item->deadline.remaining_ms();
  const bool fused = item->members.size() > 1;
  const size_t element = fused ? datatype_size(item->call.datatype) : 0;
  if (fused) {
    char* at = item->packed.data();
    for (size_t m : item->members) {
      const CollCall& c = members_[m].call->call;
      std::memcpy(at, c.sendbuf, c.count * element);
      at += c.count * element;
    }
  }
  COLLX_RETURN_IF_ERROR(comm_->execute(item->call, item->desc));
  if (fused) {
    const char* at = item->packed.data();
    for (size_t m : item->members) {
      const CollCall& c = members_[m].call->call;
      std::memcpy(c.recvbuf, at, c.count * element);
      at += c.count * element;
    }
  }
  return Status::Ok();
}

Status GroupBatch::finish() {
  if (queued_) (void)queued_->wait(Deadline::never());  // its status is in statuses_
  for (P2p& p : p2p_) {
    if (!p.request) continue;
    Status st = p.request->wait(Deadline::never());  // ends by the call's own deadline
    if (!st.ok()) record_failure(p.member, st.with_context(label(p.member) + ": "));
  }
  for (size_t m = 0; m < members_.size(); ++m) {
    if (members_[m].call->request) members_[m].call->request->finish(statuses_[m]);
  }
  return cause_;
}

Status run_group(const std::vector<GroupCall>& calls, std::shared_ptr<Communicator>* failed_comm) {
  failed_comm->reset();
  uint64_t fuse_bytes = 0;
  COLLX_RETURN_IF_ERROR(group_fuse_bytes(&fuse_bytes));
  // One batch per communicator, in the order the group first named them.
  std::vector<std::unique_ptr<GroupBatch>> batches;
  for (size_t i = 0; i < calls.size(); ++i) {
    GroupBatch* batch = nullptr;
    for (auto& b : batches) {
      if (b->comm() == calls[i].comm.get()) batch = b.get();
    }
    if (!batch) {
      batches.push_back(std::make_unique<GroupBatch>(calls[i].comm.get(), calls.size()));
      batch = batches.back().get();
    }
    batch->add(i, &calls[i]);
  }
  auto comm_of = [&](const GroupBatch* b) {
    for (const GroupCall& c : calls) {
      if (c.comm.get() == b->comm()) return c.comm;
    }
    return std::shared_ptr<Communicator>();
  };
  // Nothing is issued until every batch is planned: a call that fails here leaves every
  // communicator as it was.
  for (auto& b : batches) {
    Status st = b->plan(fuse_bytes);
    if (!st.ok()) {
      *failed_comm = comm_of(b.get());
      for (auto& other : batches) other->abandon(Status(st.code(), "not run: " + st.message()));
      return st;
    }
  }
  for (auto& b : batches) {
    Status st = b->post_p2p();
    if (!st.ok()) {
      *failed_comm = comm_of(b.get());
      for (auto& other : batches) other->abandon(Status(st.code(), "not run: " + st.message()));
      return st;
    }
  }
  // Every batch but the first queues its collectives before the first runs here, so ranks
  // that name the communicators in different orders still progress all of them together.
  // (A batch that cannot start records its failure for finish() to return.)
  for (size_t i = batches.size(); i-- > 0;) (void)batches[i]->start_collectives(/*here=*/i == 0);
  Status first;
  for (auto& b : batches) {
    Status st = b->finish();
    if (!st.ok() && first.ok()) {
      first = st;
      *failed_comm = comm_of(b.get());
    }
  }
  return first;
}

}  // namespace collx
