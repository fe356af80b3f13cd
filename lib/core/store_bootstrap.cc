#include "lib/core/store_bootstrap.h"

#include <map>

#include "lib/common/log.h"

namespace collx {

namespace {

std::mutex g_registry_mutex;
// Servers hosted by this process, by address. Deliberately never destroyed before exit: a
// rank that finished bootstrapping must not take the store away from ranks still using it.
std::map<std::string, std::unique_ptr<TcpStoreServer>>& hosted_servers() {
  static auto* servers = new std::map<std::string, std::unique_ptr<TcpStoreServer>>();
  return *servers;
}

}  // namespace

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
        it = servers.emplace(address, std::move(server)).first;
      } else if (!in_use) {
        return st.with_context("rank 0 cannot host the store at " + address + ": ");
      } else {
        COLLX_INFO(STORE, "%s is taken or belongs to another host; joining the store there", address.c_str());
      }
    }
    if (it != servers.end()) return it->second->connect(deadline, out);
  }
  return connect_tcp_store(address, deadline, out);
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

}  // namespace collx
