// Bootstrap over the key-value store: opening the store a job names (hosting it on rank 0
// when nobody else does), per-communicator key prefixes, the all-gather transports use to
// exchange addresses, and removal of a communicator's keys once every rank has read them.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "lib/store/store.h"
#include "transports/transport.h"

namespace collx {

// Connects to the TCP store at `address`. Rank 0 first tries to host it there, and marks a
// store it hosts (kStoreHostKey). When the port is already taken by a store that no rank 0
// marked (collx-run's, or one the user started) rank 0 connects like everyone else; a store
// marked by rank 0 of another process is another job's: COLLX_ERR_INVALID_USAGE naming the
// address, its host and what to do (a store started in the instant before its marker is
// written is not told apart; a job token closes that gap too). A server hosted here lives
// until the process exits, and destroying a communicator here first waits for ranks that are
// still bootstrapping (Communicator::wait_for_bootstrap_stragglers), so they never lose it.
Status open_tcp_store(const std::string& address, int rank, Deadline deadline,
                      std::shared_ptr<Store>* out);

// Whether this process hosts the TCP store server at `address` (open_tcp_store started it).
bool hosts_tcp_store(const std::string& address);

// The key by which a store hosted by a job's rank 0 says so: "pid P on HOST".
constexpr const char* kStoreHostKey = "collx/hosted-by-rank0";
// Writes kStoreHostKey into `store` (what rank 0 does to a store it hosts).
Status mark_store_hosted(Store* store);

// A unique key prefix for the next world communicator this rank creates on this store. The
// counter lives in the store (one per rank): every rank creates its world communicators in
// the same order, so the counters agree, whichever process or thread each rank is.
Status next_world_prefix(Store* store, int rank, std::string* prefix);

// transport::Bootstrap on a store under `prefix`: allgather = set prefix/name/rank, then
// read every rank's key. Remembers the keys so cleanup() can remove them.
class StoreBootstrap : public transport::Bootstrap {
 public:
  StoreBootstrap(std::shared_ptr<Store> store, std::string prefix, int rank, int size)
      : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

  Status allgather(const std::string& name, const std::vector<uint8_t>& mine,
                   std::vector<std::vector<uint8_t>>* all, Deadline deadline) override;

  // Call once every rank has finished its reads (after transport set-up). The last rank to
  // arrive removes every key of this prefix, so create/destroy loops do not grow the store.
  Status cleanup();

  // Whether some rank has yet to call cleanup() for `prefix` (its "done" counter exists
  // until the last rank arrives): polls `store` until no rank is left or the deadline.
  // OK once none is left; COLLX_ERR_TIMEOUT naming how many arrived; a store error as is.
  static Status wait_until_cleaned(Store* store, const std::string& prefix, int size, Deadline deadline);

  const std::string& prefix() const { return prefix_; }
  Store* store() const { return store_.get(); }

 private:
  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_;
  int size_;
  std::mutex mutex_;
  std::vector<std::string> names_;
};

}  // namespace collx
