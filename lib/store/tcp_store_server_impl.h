// The TCP store server's one class, shared by its files: tcp_store_server.cc (the serving
// loop, accepting, handshake deadlines, reading), tcp_store_server_requests.cc (answering
// requests, parked waits) and tcp_store_server_replies.cc (sending, refusing, closing).
// Internal to lib/store: the public face is lib/store/store.h's TcpStoreServer.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/store/store.h"
#include "lib/store/store_common.h"
#include "lib/store/store_socket.h"
#include "lib/store/store_table.h"
#include "lib/store/store_wire.h"
#include "lib/store/tcp_store_connection.h"
#include "lib/common/unique_fd.h"

namespace collx {
namespace tcp_store_server {

using namespace store_wire;
using Clock = ServerConnection::Clock;
using Connection = ServerConnection;
constexpr size_t kReadChunkBytes = ServerConnection::kReadChunkBytes;

using Clock = ServerConnection::Clock;
using Connection = ServerConnection;

// Reads per readiness event, so one fast sender cannot starve the others.
constexpr int kReadsPerEvent = 16;
// A waiting timeout beyond this (about 115 days) is treated as forever, which keeps the
// deadline arithmetic far from overflow.
constexpr int64_t kMaxTimeoutMs = 10'000'000'000;
// When accept() runs out of descriptors, stop accepting for a moment rather than spin.
constexpr int kAcceptPauseMs = 100;
constexpr uint64_t kWakeToken = 0;
constexpr uint64_t kListenToken = 1;

class TcpStoreServerImpl : public TcpStoreServer {
 public:
  TcpStoreServerImpl(std::string connect_host, int port, const TcpStoreServerOptions& options, UniqueFd listen_fd,
                     UniqueFd wake_fd, UniqueFd epoll_fd)
      : connect_host_(std::move(connect_host)),
        port_(port),
        options_(options),
        listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        epoll_fd_(std::move(epoll_fd)),
        table_(StoreCapacity{options.max_keys, options.max_bytes}) {
    thread_ = std::thread([this] { serve(); });
  }

  ~TcpStoreServerImpl() override {
    stop_.store(true);
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
    (void)ignored;
    thread_.join();
  }

  int port() const override { return port_; }

  Status connect(Deadline deadline, std::shared_ptr<Store>* out) override {
    return connect_tcp_store(format_host_port(connect_host_, port_), options_.job_token, deadline, out);
  }

  TcpStoreServerCounters counters() const override {
    TcpStoreServerCounters out;
    out.handshaking_connections = handshaking_.load();
    out.refused_connections = refused_connections_.load();
    out.handshake_timeouts = handshake_timeouts_.load();
    out.refused_handshakes = refused_handshakes_.load();
    out.allocation_failures = allocation_failures_.load();
    out.max_unauthenticated_input_bytes = max_unauthenticated_input_.load();
    return out;
  }

 private:
  void serve();
  void accept_all();
  void admit(int fd, const sockaddr_storage& address, socklen_t length);
  template <typename Work>
  void guarded(uint64_t id, Work&& work);
  void expire_handshakes();
  void on_connection_event(uint64_t id, uint32_t events);
  bool read_input(Connection* c);
  void service(Connection* c);
  void process_requests(Connection* c);
  void handle(Connection* c, Request request);
  void park(Connection* c, Request request, size_t missing_index);
  void key_stored(const std::string& key);
  void finish_wait(Connection* c, const Status& status);
  void expire_timeouts();
  void drop_waiter(Connection* c);
  void send_reply(Connection* c, const Reply& reply);
  bool flush(Connection* c);
  void update_interest(Connection* c);
  void protocol_violation(Connection* c, const Status& status);
  void refuse(Connection* c, Reply reply, const Status& why);
  void close_after_error(Connection* c, Reply reply, const Status& why);
  void close_connection(Connection* c);
  Connection* find(uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
  }
  int epoll_timeout_ms() const;

  const std::string connect_host_;
  const int port_;
  const TcpStoreServerOptions options_;  // job_token empty = no authentication
  UniqueFd listen_fd_, wake_fd_, epoll_fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  // Published for counters(); written by the serving thread only.
  std::atomic<uint64_t> handshaking_{0}, refused_connections_{0}, handshake_timeouts_{0}, refused_handshakes_{0},
      allocation_failures_{0}, max_unauthenticated_input_{0};

  // Everything below belongs to the serving thread.
  StoreTable table_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = kListenToken + 1;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> connections parked on it
  std::multimap<Clock::time_point, uint64_t> timeouts_;            // parked connections' deadlines
  std::vector<uint64_t> ready_;  // connections to service again (a wait ended, output drained)
  // Handshake deadlines of unauthenticated connections in accept order, hence in deadline
  // order (all get the same timeout); entries of connections gone or authenticated are skipped.
  std::deque<std::pair<Clock::time_point, uint64_t>> handshake_deadlines_;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_at_;
};

// Runs one connection's work; memory running out in it (or any other exception, which would
// otherwise end the process) drops that connection alone, with a warning.
template <typename Work>
void TcpStoreServerImpl::guarded(uint64_t id, Work&& work) {
  try {
    work();
    return;
  } catch (const std::bad_alloc&) {
    allocation_failures_.fetch_add(1);
    COLLX_WARN(STORE, "store server: out of memory serving a client; dropping it");
  } catch (const std::exception& e) {
    COLLX_WARN(STORE, "store server: %s while serving a client; dropping it", e.what());
  }
  if (Connection* c = find(id)) {
    COLLX_WARN(STORE, "store server: dropped client %s", c->peer.c_str());
    close_connection(c);
  }
}

}  // namespace tcp_store_server
}  // namespace collx
