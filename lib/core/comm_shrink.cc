// Communicator shrink (ULFM's MPIX_Comm_shrink): after a peer died, the ranks that are left
// agree through the job's store on who they are and form a new communicator of them.
//
// Agreement (keys under <prefix>/k<n>, n counting this communicator's shrinks):
//  1. A caller announces itself: join/<rank> = 1.
//  2. It then polls (every 20 ms, never spinning) until a decision exists or it can make one:
//     - a rank that has not joined is marked dead (dead/<rank> = 1, visible to everyone) when
//       some caller has proof: it shares that rank's host and pid namespace and the rank's
//       process no longer exists (the pid recorded at creation);
//     - when every rank has joined or is marked dead, or this caller's deadline passed, it
//       proposes "the ranks that joined" with compare_set on decision (first writer wins)
//       and adopts whatever the store holds: every caller ends with the same member list,
//       whatever each one believed about who died.
//  3. A caller not in the decision (it joined after the others' deadline) fails naming the
//     members; the members create the new communicator (ranks in old-rank order) under
//     <prefix>/k<n>/c, and the last of them removes the join/dead keys. The decision keys
//     stay (a few bytes), so a rank that arrives even later still learns it was excluded.
// The store is the only arbiter: when the process hosting it died (rank 0 hosts it unless
// collx-run or a store handle was given), shrink cannot work and says so.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "lib/common/log.h"
#include "lib/core/comm.h"

namespace collx {

namespace {

Bytes to_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

// "0,1,3" -> {0, 1, 3}; every rank in [0, size), ascending, at least one.
Status parse_members(const Bytes& value, int size, std::vector<int>* out) {
  out->clear();
  const std::string text(value.begin(), value.end());
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long r = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || r < 0 || r >= size || (!out->empty() && r <= out->back())) {
      return make_status(COLLX_ERR_PROTOCOL, "malformed shrink decision '%s' in the store", text.c_str());
    }
    out->push_back(static_cast<int>(r));
    pos = comma + 1;
  }
  return Status::Ok();
}

}  // namespace

Status Communicator::shrink(int64_t timeout_ms, std::shared_ptr<Communicator>* out) {
  LogRankScope log_rank(rank_);
  out->reset();
  const int64_t budget_ms = timeout_ms >= 0 ? timeout_ms : settings_.timeout_ms;
  const Deadline deadline = Deadline::after_ms(budget_ms);
  const uint64_t n = ++shrinks_;
  const std::string base = prefix_ + string_printf("/k%llu", static_cast<unsigned long long>(n));
  const std::string where = string_printf("comm_shrink on rank %d of '%s': ", rank_, name_.c_str());
  Store* store = store_.get();
  auto store_failed = [&](const Status& st) {
    const std::string addr = job_.store_addr.empty() ? std::string("the store handle given at creation")
                                                     : job_.store_addr;
    return st.with_context(where + "the job's store (" + addr +
                           ") failed, so the survivors cannot agree on who is left; if the process "
                           "hosting it died (rank 0 hosts it unless collx-run or a store handle "
                           "provides it), shrink cannot work: ");
  };

  // 1. Announce this rank.
  int64_t value = 0;
  Status st = store->add(base + "/join/" + std::to_string(rank_), 1, &value);
  if (!st.ok()) return store_failed(st);

  // 2. Agree on the members.
  std::vector<char> joined(static_cast<size_t>(size_), 0);
  std::vector<char> dead(static_cast<size_t>(size_), 0);
  joined[static_cast<size_t>(rank_)] = 1;
  Bytes decision;
  for (;;) {
    int64_t decided = 0;
    st = store->add(base + "/decided", 0, &decided);
    if (!st.ok()) return store_failed(st);
    if (decided > 0) {
      // Set before "decided" was counted up: present now.
      st = store->get(base + "/decision", &decision, Deadline::after_ms(std::max(deadline.remaining_ms(), 5000)));
      if (!st.ok()) return store_failed(st);
      break;
    }
    bool settled = true;
    for (int r = 0; r < size_; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (joined[i] || dead[i]) continue;
      st = store->add(base + "/join/" + std::to_string(r), 0, &value);
      if (!st.ok()) return store_failed(st);
      if (value > 0) {
        joined[i] = 1;
        continue;
      }
      st = store->add(base + "/dead/" + std::to_string(r), 0, &value);
      if (!st.ok()) return store_failed(st);
      const bool proof = rank_hosts_.size() == static_cast<size_t>(size_) &&
                         known_dead(rank_hosts_[static_cast<size_t>(rank_)], rank_hosts_[i]);
      if (value == 0 && proof) {
        COLLX_INFO(INIT, "%srank %d (pid %d) has exited; excluding it", where.c_str(), r,
                   static_cast<int>(rank_hosts_[i].pid));
        st = store->add(base + "/dead/" + std::to_string(r), 1, &value);
        if (!st.ok()) return store_failed(st);
      }
      if (value > 0) {
        // Marked only with proof that its process is gone: it cannot join any more.
        dead[i] = 1;
        continue;
      }
      settled = false;
    }
    if (settled || deadline.expired()) {
      std::vector<int> proposal;
      for (int r = 0; r < size_; ++r) {
        if (joined[static_cast<size_t>(r)]) proposal.push_back(r);
      }
      if (!settled) {
        std::vector<int> missing;
        for (int r = 0; r < size_; ++r) {
          if (!joined[static_cast<size_t>(r)] && !dead[static_cast<size_t>(r)]) missing.push_back(r);
        }
        COLLX_WARN(INIT, "%sranks %s neither called shrink nor are known to have exited by the deadline "
                   "(%lld ms); proposing the ranks that did: %s", where.c_str(), join_ranks(missing).c_str(),
                   static_cast<long long>(budget_ms), join_ranks(proposal).c_str());
      }
      st = store->compare_set(base + "/decision", Bytes(), to_bytes(join_ranks(proposal)), &decision);
      if (!st.ok()) return store_failed(st);
      st = store->add(base + "/decided", 1, &value);
      if (!st.ok()) return store_failed(st);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, std::max(1, deadline.remaining_ms(20)))));
  }

  std::vector<int> members;
  COLLX_RETURN_IF_ERROR(parse_members(decision, size_, &members).with_context(where));
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) {
    return make_status(COLLX_ERR_REMOTE,
                       "%sthis rank was excluded: the other ranks agreed on the members (old ranks %s) "
                       "before it called shrink (after their deadline)",
                       where.c_str(), join_ranks(members).c_str());
  }
  const int new_rank = static_cast<int>(me - members.begin());
  COLLX_INFO(INIT, "%sagreed on old ranks %s; this rank becomes %d of %zu", where.c_str(),
             join_ranks(members).c_str(), new_rank, members.size());

  // 3. The new communicator.
  std::shared_ptr<Communicator> comm(new Communicator());
  comm->job_ = job_;
  comm->name_ = name_ + string_printf(".shrink%llu", static_cast<unsigned long long>(n));
  st = comm->init(job_, settings_, store_, base + "/c", new_rank, static_cast<int>(members.size()));
  if (!st.ok()) return st.with_context(where);

  // The last member to get here removes the agreement's per-rank keys (best effort).
  if (store->add(base + "/formed", 1, &value).ok() && value == static_cast<int64_t>(members.size())) {
    for (int r = 0; r < size_; ++r) {
      store->remove(base + "/join/" + std::to_string(r)).ignore();
      store->remove(base + "/dead/" + std::to_string(r)).ignore();
    }
    store->remove(base + "/formed").ignore();
  }
  *out = std::move(comm);
  return Status::Ok();
}

}  // namespace collx
