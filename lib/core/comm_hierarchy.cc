// Hierarchical all-reduce (COLLX_ALGO_HIERARCHICAL) for communicators whose ranks span hosts.
//
// Every host holding the same number L of ranks (NCCL/UCC style):
//   1. reduce-scatter inside each host (its shm child communicator): local rank j gets slice j
//      (count / L elements) of the host's sum;
//   2. all-reduce of slice j across hosts among the ranks of local index j (L child
//      communicators of one rank per host, all working at once: every rank's link is used);
//   3. all-gather of the slices inside each host.
//   The count % L elements left over (and the whole vector when count < L) take the path below.
// Hosts holding different numbers of ranks: reduce to each host's first rank (its leader),
// all-reduce among the leaders, broadcast inside each host.
//
// Bitwise identical results on every rank: every element is reduced once, by one rank (slice
// owner or leader), in an order fixed by the schedules, then only copied (all-gather,
// broadcast); the all-reduce across hosts gives the same bits on each of its ranks like every
// collx all-reduce. AVG and PREMUL_SUM arrive here as SUM (comm_collective.cc dispatch).
//
// Degenerate layouts (forced only; the automatic choice never offers it there): on one host,
// or with one rank per host, there is one level only and it runs the ring all-reduce.
//
// Children are internal: named '<parent>.host<h>' and '<parent>.x<j>', with store prefixes
// '<parent prefix>/hier/...' that split and dup numbering (/s<n>/c<color>) never produces, so
// the user's split numbering is untouched. They are made by the first hierarchical call
// (every rank takes that decision at the same call: the algorithm is in the OpDesc and the
// layout is the same everywhere), after a barrier on the parent that carries the call's
// OpDesc, so ranks disagreeing about the call fail with a mismatch instead of waiting on the
// store. A failure in any child poisons every child of this rank (telling their peers) and
// the parent, so one dead rank reaches every survivor through the chain of children.
#include "lib/core/comm_hierarchy.h"

#include <algorithm>
#include <functional>
#include <map>

#include "lib/common/log.h"
#include "lib/common/strings.h"
#include "lib/core/comm.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

void Hierarchy::fill(const std::vector<std::string>& host_of_rank, int rank) {
  std::map<std::string, int> index;
  members.clear();
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    auto found = index.find(host_of_rank[r]);
    int h;
    if (found == index.end()) {
      h = static_cast<int>(members.size());
      index[host_of_rank[r]] = h;
      members.emplace_back();
    } else {
      h = found->second;
    }
    if (static_cast<int>(r) == rank) {
      host = h;
      local = static_cast<int>(members[static_cast<size_t>(h)].size());
    }
    members[static_cast<size_t>(h)].push_back(static_cast<int>(r));
  }
  hosts = static_cast<int>(members.size());
  max_per_host = 1;
  uniform = true;
  for (const auto& m : members) max_per_host = std::max(max_per_host, static_cast<int>(m.size()));
  for (const auto& m : members) uniform = uniform && static_cast<int>(m.size()) == max_per_host;
}

std::vector<std::shared_ptr<Communicator>> Hierarchy::children() {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::shared_ptr<Communicator>> out;
  if (intra) out.push_back(intra);
  if (cross) out.push_back(cross);
  return out;
}

void Communicator::plan_hierarchy(const std::vector<std::string>& host_of_rank) {
  auto plan = std::make_shared<Hierarchy>();
  plan->fill(host_of_rank, rank_);
  if (plan->hosts <= 1) {
    hierarchy_.reset();
    return;
  }
  // The cost model predicts the parts inside hosts with the per-host communicators' transport.
  HostLayout layout;
  layout.hosts = plan->hosts;
  layout.max_per_host = plan->max_per_host;
  layout.uniform = plan->uniform;
  layout.intra_transport = (settings_.transports & COLLX_TRANSPORT_SHM) ? "shm" : model_.transport();
  auto tuned = settings_.tuned.find(layout.intra_transport);
  layout.intra = tuned != settings_.tuned.end() ? tuned->second : default_link_cost(layout.intra_transport);
  model_.set_hosts(layout);
  hierarchy_ = std::move(plan);
}

namespace {

// "0,2,5": parent ranks of a child communicator, for error messages.
// "rank 0 is rank 2 of 'world', rank 1 is rank 3": how a child's ranks (named in its
// errors) map to the parent's, which the user knows.
std::string rank_map(const std::vector<int>& ranks, const std::string& parent) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += string_printf("%srank %zu is rank %d", i == 0 ? "" : ", ", i, ranks[i]);
    if (i == 0) out += " of '" + parent + "'";
  }
  return out;
}

}  // namespace

// Makes this rank's child communicators (the first hierarchical all-reduce).
static Status build_children(Hierarchy* h, const CommSettings& parent_settings,
                             const std::function<Status(const std::string& name, const std::string& prefix,
                                                        const CommSettings& settings, int rank, int size,
                                                        std::shared_ptr<Communicator>* out)>& make) {
  // Children choose their own algorithms with their own cost model: COLLX_ALGO rules are the
  // user's for the parent (a rule forcing 'hierarchical' must not reach a child).
  CommSettings settings = parent_settings;
  settings.selector = AlgorithmSelector();
  std::shared_ptr<Communicator> intra, cross;
  const auto& mine = h->members[static_cast<size_t>(h->host)];
  Status st;
  if (mine.size() > 1) {
    st = make(string_printf(".host%d", h->host), string_printf("/hier/host%d", h->host), settings, h->local,
              static_cast<int>(mine.size()), &intra);
  }
  const bool in_cross = h->uniform || h->local == 0;
  if (st.ok() && in_cross) {
    st = make(string_printf(".x%d", h->local), string_printf("/hier/x%d", h->local), settings, h->host, h->hosts,
              &cross);
  }
  std::lock_guard<std::mutex> lock(h->mutex);
  h->intra = std::move(intra);
  h->cross = std::move(cross);
  h->built = st.ok();
  return st;
}

Status Communicator::allreduce_hierarchical(const algo::Context& ctx, const algo::CollArgs& args) const {
  Hierarchy* h = hierarchy_.get();
  if (h == nullptr || !h->applies()) return algo::allreduce_ring(ctx, args);  // one level only
  if (args.count == 0) return algo::barrier_dissemination(ctx, args);        // run_algorithm does this too

  bool built;
  {
    std::lock_guard<std::mutex> lock(h->mutex);
    built = h->built;
  }
  if (!built) {
    // Every rank of the parent meets first, comparing this call's OpDesc: a rank that called
    // something else fails with a mismatch here instead of leaving the others on the store.
    COLLX_RETURN_IF_ERROR(algo::barrier_dissemination(ctx, args));
    auto make = [this](const std::string& suffix, const std::string& prefix_suffix, const CommSettings& settings,
                       int rank, int size, std::shared_ptr<Communicator>* out) -> Status {
      std::shared_ptr<Communicator> child(new Communicator());
      child->job_ = job_;
      child->name_ = name_ + suffix;
      Status st = child->init(job_, settings, store_, prefix_ + prefix_suffix, rank, size);
      if (!st.ok()) {
        return st.with_context("hierarchical all-reduce: creating '" + child->name_ + "': ");
      }
      COLLX_INFO(INIT, "communicator '%s': internal child '%s' (rank %d of %d) over %s", name_.c_str(),
                 child->name_.c_str(), rank, size, child->transport_name());
      *out = std::move(child);
      return Status::Ok();
    };
    Status st = build_children(h, settings_, make);
    if (aborted_.load(std::memory_order_acquire)) {
      for (auto& child : h->children()) child->abort();
    }
    COLLX_RETURN_IF_ERROR(st);
  }

  const size_t element = datatype_size(args.datatype);
  const char* send = static_cast<const char*>(args.sendbuf);
  char* recv = static_cast<char*>(args.recvbuf);
  const auto& mine = h->members[static_cast<size_t>(h->host)];
  std::vector<int> cross_ranks;  // parent ranks of this rank's cross communicator
  for (const auto& m : h->members) {
    if (static_cast<size_t>(h->local) < m.size()) cross_ranks.push_back(m[static_cast<size_t>(h->local)]);
  }

  // One collective on a child, with what is left of this call's deadline.
  auto step = [&](const char* what, const std::shared_ptr<Communicator>& child, const std::vector<int>& ranks,
                  collx_coll_t coll, const void* sendbuf, void* recvbuf, size_t count) -> Status {
    CollCall call;
    call.coll = coll;
    call.sendbuf = sendbuf;
    call.recvbuf = recvbuf;
    call.count = count;
    call.datatype = args.datatype;
    call.op = args.op;
    call.root = 0;
    call.algorithm = COLLX_ALGO_AUTO;  // the child's own cost model (it has no COLLX_ALGO rules)
    call.mem_kind = COLLX_MEM_HOST;
    call.timeout_ms = args.deadline.is_never() ? settings_.timeout_ms : args.deadline.remaining_ms();
    Status st = child->run(call);
    if (st.ok()) return st;
    return st.with_context(string_printf("hierarchical all-reduce, %s on '%s' (where %s): ", what,
                                         child->name().c_str(), rank_map(ranks, name_).c_str()));
  };

  // Reduce to the host's first rank, all-reduce among those, broadcast: `count` elements at
  // element offset `offset`.
  auto via_leaders = [&](size_t offset, size_t count) -> Status {
    const size_t at = offset * element;
    if (h->intra) {
      COLLX_RETURN_IF_ERROR(step("reduce inside the host", h->intra, mine, COLLX_COLL_REDUCE, send + at,
                                 h->local == 0 ? recv + at : nullptr, count));
    }
    if (h->local == 0) {
      COLLX_RETURN_IF_ERROR(step("all-reduce across hosts", h->cross, cross_ranks, COLLX_COLL_ALLREDUCE,
                                 h->intra ? recv + at : send + at, recv + at, count));
    }
    if (h->intra) {
      COLLX_RETURN_IF_ERROR(step("broadcast inside the host", h->intra, mine, COLLX_COLL_BROADCAST, recv + at,
                                 recv + at, count));
    }
    return Status::Ok();
  };

  auto run_all = [&]() -> Status {
    if (!h->uniform) return via_leaders(0, args.count);
    const size_t local_size = mine.size();
    const size_t slice = args.count / local_size;
    if (slice > 0) {
      char* my_slice = recv + static_cast<size_t>(h->local) * slice * element;
      // In place when send == recv: recvbuf == sendbuf + rank * recvcount (reduce-scatter)
      // and sendbuf == recvbuf + rank * sendcount (all-gather).
      COLLX_RETURN_IF_ERROR(step("reduce-scatter inside the host", h->intra, mine, COLLX_COLL_REDUCE_SCATTER,
                                 send, my_slice, slice));
      COLLX_RETURN_IF_ERROR(step("all-reduce across hosts", h->cross, cross_ranks, COLLX_COLL_ALLREDUCE, my_slice,
                                 my_slice, slice));
      COLLX_RETURN_IF_ERROR(step("all-gather inside the host", h->intra, mine, COLLX_COLL_ALLGATHER, my_slice,
                                 recv, slice));
    }
    const size_t done = slice * local_size;
    if (done < args.count) COLLX_RETURN_IF_ERROR(via_leaders(done, args.count - done));
    return Status::Ok();
  };

  Status st = run_all();
  if (!st.ok()) {
    // Tell the peers of every child (those of the failed one were told by its own failure),
    // so the failure reaches ranks waiting in other children; the parent is failed by execute().
    const Status relay = st.with_context(string_printf("rank %d of '%s' failed: ", rank_, name_.c_str()));
    for (auto& child : h->children()) {
      if (child->health().ok()) child->fail(relay);
    }
  }
  return st;
}

void Communicator::abort_hierarchy() {
  if (!hierarchy_) return;
  for (auto& child : hierarchy_->children()) child->abort();
}

void Communicator::destroy_hierarchy() {
  if (!hierarchy_) return;
  std::vector<std::shared_ptr<Communicator>> children = hierarchy_->children();
  const Status failure = health();
  for (auto& child : children) {
    // A failed parent may have lost peers: fail the children too, so their close does not
    // wait for goodbyes that will never come.
    if (!failure.ok() && child->health().ok()) child->fail(failure);
    child->destroy();
  }
  std::lock_guard<std::mutex> lock(hierarchy_->mutex);
  hierarchy_->intra.reset();
  hierarchy_->cross.reset();
  hierarchy_->built = false;
}

}  // namespace collx
