#include "lib/core/store_bootstrap.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include "lib/common/log.h"
#include "lib/store/store_common.h"

namespace collx {

namespace {

std::mutex g_registry_mutex;
// Servers hosted by this process, by address. Deliberately never destroyed before exit: a
// rank that finished bootstrapping must not take the store away from ranks still using it.
std::map<std::string, std::unique_ptr<TcpStoreServer>>& hosted_servers() {
  static auto* servers = new std::map<std::string, std::unique_ptr<TcpStoreServer>>();
  return *servers;
}

// Rank 0 of a job that finds its store's port taken joins the store there. Refusing when that
// store is another job's rank 0's keeps two jobs from merging into one world.
Status join_unless_foreign(const std::string& address, Deadline deadline, std::shared_ptr<Store>* out) {
  std::shared_ptr<Store> store;
  COLLX_RETURN_IF_ERROR(connect_tcp_store(address, deadline, &store));
  Bytes host;
  Status found = store->get(kStoreHostKey, &host, Deadline::after_ms(0));
  if (found.ok())
    return make_status(COLLX_ERR_INVALID_USAGE,
                       "rank 0 cannot host the store at %s: the port is taken by a store that rank 0 of another job "
                       "hosts (%s), and joining it would merge the two jobs. Give this job a free port "
                       "(COLLX_STORE_ADDR, or MASTER_PORT: the store uses MASTER_PORT+1), and set COLLX_JOB_TOKEN "
                       "so that jobs cannot join each other's stores",
                       address.c_str(), std::string(host.begin(), host.end()).c_str());
  if (found.code() != COLLX_ERR_TIMEOUT) return found.with_context("store at " + address + ": ");
  COLLX_INFO(STORE, "%s is taken or belongs to another host; joining the store there (no rank 0 hosts it)",
             address.c_str());
  *out = std::move(store);
  return Status::Ok();
}

}  // namespace

Status mark_store_hosted(Store* store) {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string who = string_printf("pid %d on %s", static_cast<int>(::getpid()), host);
  return store->set(kStoreHostKey, Bytes(who.begin(), who.end()));
}

Status open_tcp_store(const std::string& address, int rank, Deadline deadline,
                      std::shared_ptr<Store>* out) {
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto& servers = hosted_servers();
    auto it = servers.find(address);
    if (it == servers.end()) {
      std::unique_ptr<TcpStoreServer> server;
      bool in_use = false;
      Status st = start_tcp_store_server(address, &server, &in_use);
      if (st.ok()) {
        COLLX_INFO(STORE, "hosting the store at %s", address.c_str());
        std::shared_ptr<Store> store;
        COLLX_RETURN_IF_ERROR(server->connect(deadline, &store));
        COLLX_RETURN_IF_ERROR(mark_store_hosted(store.get()));
        servers.emplace(address, std::move(server));
        *out = std::move(store);
        return Status::Ok();
      }
      if (!in_use) return st.with_context("rank 0 cannot host the store at " + address + ": ");
      return join_unless_foreign(address, deadline, out);
    }
    return it->second->connect(deadline, out);
  }
  return connect_tcp_store(address, deadline, out);
}

bool hosts_tcp_store(const std::string& address) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  return hosted_servers().count(address) != 0;
}

Status next_world_prefix(Store* store, int rank, std::string* prefix) {
  int64_t generation = 0;
  COLLX_RETURN_IF_ERROR(store->add("collx/generation/" + std::to_string(rank), 1, &generation));
  *prefix = "collx/w" + std::to_string(generation - 1);
  return Status::Ok();
}

Status StoreBootstrap::allgather(const std::string& name, const std::vector<uint8_t>& mine,
                                 std::vector<std::vector<uint8_t>>* all, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    names_.push_back(name);
  }
  const std::string base = prefix_ + "/" + name + "/";
  COLLX_RETURN_IF_ERROR(store_->set(base + std::to_string(rank_), mine));
  all->assign(static_cast<size_t>(size_), {});
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      (*all)[static_cast<size_t>(r)] = mine;
      continue;
    }
    Status st = store_->get(base + std::to_string(r), &(*all)[static_cast<size_t>(r)], deadline);
    if (!st.ok()) {
      if (st.code() == COLLX_ERR_TIMEOUT) {
        return make_status(COLLX_ERR_TIMEOUT,
                           "rank %d of %d did not join '%s' before the deadline (is it running, "
                           "with the same world size and store?): %s",
                           r, size_, prefix_.c_str(), st.message().c_str());
      }
      return st;
    }
  }
  return Status::Ok();
}

Status StoreBootstrap::cleanup() {
  int64_t arrived = 0;
  COLLX_RETURN_IF_ERROR(store_->add(prefix_ + "/done", 1, &arrived));
  if (arrived < size_) return Status::Ok();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& name : names_) {
    for (int r = 0; r < size_; ++r) store_->remove(prefix_ + "/" + name + "/" + std::to_string(r)).ignore();
  }
  return store_->remove(prefix_ + "/done");
}

Status StoreBootstrap::wait_until_cleaned(Store* store, const std::string& prefix, int size, Deadline deadline) {
  // The store has no "wait until removed", and this wait is rare (a rank still bootstrapping
  // while rank 0 tears down), so a short poll is enough; the first look usually ends it.
  constexpr int kPollMs = 10;
  const std::string done = prefix + "/done";
  for (;;) {
    Bytes value;
    Status st = store->get(done, &value, Deadline::after_ms(0));
    if (st.code() == COLLX_ERR_TIMEOUT) return Status::Ok();  // removed: everyone arrived
    if (!st.ok()) return st;
    if (deadline.expired()) {
      int64_t arrived = 0;
      if (!parse_store_counter(done, &value, &arrived).ok()) arrived = -1;
      return make_status(COLLX_ERR_TIMEOUT, "%lld of %d ranks finished bootstrapping '%s' by the deadline",
                         static_cast<long long>(arrived), size, prefix.c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
}

}  // namespace collx
