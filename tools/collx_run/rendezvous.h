// The agents' rendezvous through the library's TCP store. One agent (the one that manages to
// host the store at --rdzv-endpoint) is the leader: each attempt it collects the agents that
// joined, assigns node ranks and global rank offsets, and hosts a fresh store for that
// attempt's ranks. A fresh store per attempt matters: the library names its bootstrap keys
// by per-rank counters ("collx/generation/<rank>"), so ranks of attempt k+1 must never see
// the keys attempt k left behind.
#pragma once

#include <memory>
#include <string>

#include "lib/common/status.h"
#include "lib/store/store.h"
#include "tools/collx_run/run_options.h"

namespace collx_run {

// What one attempt looks like from this agent.
struct AttemptPlan {
  int attempt = 0;
  int nnodes = 1;
  int node_rank = 0;
  int world_size = 1;
  int rank_offset = 0;     // global rank of local rank 0
  int local_size = 1;
  std::string store_addr;  // the ranks' store for this attempt ("host:port")
  std::string key_prefix;  // the agents' keys for this attempt ("collx-run/<id>/<attempt>/")
};

class Rendezvous {
 public:
  // Hosts the rendezvous store at the endpoint (or 127.0.0.1:0 standalone) when this agent
  // may be node 0 and the port is free there; otherwise connects to it.
  collx::Status open(const RunOptions& options);

  // Agrees on attempt `attempt` with every other agent; every wait ends by --rdzv-timeout.
  collx::Status join(int attempt, AttemptPlan* plan);

  // A store client for the agent's own keys; a second one so a thread may wait on it.
  collx::Store* store() const { return store_.get(); }
  collx::Store* watch_store() const { return watch_store_.get(); }
  bool leader() const { return server_ != nullptr; }

 private:
  collx::Status lead(const std::string& prefix, int* nnodes);

  RunOptions options_;
  std::string host_;  // the endpoint's host: where the leader's stores listen
  std::unique_ptr<collx::TcpStoreServer> server_;
  std::unique_ptr<collx::TcpStoreServer> attempt_server_;
  std::shared_ptr<collx::Store> store_;
  std::shared_ptr<collx::Store> watch_store_;
};

// "host:port" -> host (brackets of an IPv6 literal kept) and port; false when malformed
// (lib/common's parse_host_port decides).
bool split_endpoint(const std::string& endpoint, std::string* host, int* port);

}  // namespace collx_run
