// The TCP store client. Each request is a blocking exchange on one connection, bounded by a
// deadline. A client is shared by threads, and one thread's get() may wait for a key that
// another thread of the same client is about to set: so rather than one connection behind a
// mutex (which would deadlock there), the client keeps a small pool and a call that finds no
// idle connection opens another. Connections are taken and returned under a mutex; the I/O
// itself runs outside it.
#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "lib/common/auth_policy.h"
#include "lib/common/log.h"
#include "lib/store/store.h"
#include "lib/store/store_auth.h"
#include "lib/store/store_common.h"
#include "lib/store/store_socket.h"
#include "lib/store/store_timeout.h"
#include "lib/store/store_wire.h"
#include "lib/common/unique_fd.h"

namespace collx {
namespace {

using namespace store_wire;

// The server times GET and WAIT itself and answers with a message naming the missing key;
// the client gives it this long past the deadline to do so before giving up on its own.
constexpr int kServerAnswerGraceMs = 100;
constexpr size_t kReceiveChunkBytes = 64 << 10;

// One connection to the server. A call abandoned at its deadline may leave part of its
// request unsent (kept in `unsent`, sent before the next request) and its reply unread
// (skipped by request id), so the stream stays usable.
struct Connection {
  UniqueFd fd;
  Bytes unsent;
  size_t unsent_start = 0;
  Bytes received;  // bytes [received_start, end) are not decoded yet
  size_t received_start = 0;
  uint32_t next_request_id = 1;
};

enum class Outcome { kAnswered, kTimedOut, kServerGone, kBroken };

class TcpStoreClient : public Store {
 public:
  TcpStoreClient(std::string address, std::string token, std::unique_ptr<Connection> first,
                 int64_t operation_timeout_ms)
      : address_(std::move(address)), token_(std::move(token)), operation_timeout_ms_(operation_timeout_ms) {
    idle_.push_back(std::move(first));
  }

  // The HELLO exchange of a fresh connection: agrees on the protocol version and, with a job
  // token, runs the AUTH exchange (store_auth.h) before the connection is used.
  static Status hello(const std::string& address, const std::string& token, Connection* connection,
                      Deadline deadline) {
    Request request;
    request.opcode = Opcode::kHello;
    Reply reply;
    COLLX_RETURN_IF_ERROR(handshake_step(address, connection, request, deadline, &reply));
    bool needed = false;
    auth::Nonce client_nonce;
    const Bytes challenge = reply.challenge;
    COLLX_RETURN_IF_ERROR(store_auth_request(address, token, challenge, &needed, &request, &client_nonce));
    if (!needed) return Status::Ok();
    COLLX_RETURN_IF_ERROR(handshake_step(address, connection, request, deadline, &reply));
    return store_auth_check_server(address, token, challenge, client_nonce, reply.mac);
  }

  // A fresh connection through HELLO (and AUTH). A server closes a connection before answering
  // when too many connections are handshaking (TcpStoreServerOptions): that is retried with
  // backoff until the deadline, like a connection refused while nothing listens yet.
  static Status open_connection(const std::string& address, const std::string& token, const Deadline& deadline,
                                bool retry_refused, std::unique_ptr<Connection>* out) {
    StoreBackoff backoff(1, 100);
    bool closed_before = false;
    while (true) {
      auto connection = std::make_unique<Connection>();
      COLLX_RETURN_IF_ERROR(connect_tcp(address, deadline, &connection->fd, retry_refused));
      Status status = hello(address, token, connection.get(), deadline);
      if (status.ok()) {
        *out = std::move(connection);
        return status;
      }
      if (status.code() == COLLX_ERR_REMOTE && backoff.sleep_until_next(deadline)) {
        closed_before = true;
        continue;
      }
      if (closed_before && deadline.expired())
        return make_status(COLLX_ERR_TIMEOUT,
                           "connecting to the store at %s: it closed every connection before answering until the "
                           "deadline (a server with a job token closes connections beyond its cap of handshaking "
                           "ones); last: %s",
                           address.c_str(), status.message().c_str());
      return status;
    }
  }

  static Status handshake_step(const std::string& address, Connection* connection, Request& request,
                               const Deadline& deadline, Reply* reply) {
    Status status;
    Outcome outcome = exchange(address, connection, request, deadline, reply, &status);
    if (outcome == Outcome::kTimedOut)
      return make_status(COLLX_ERR_TIMEOUT, "connecting to the store at %s timed out waiting for its %s answer",
                         address.c_str(), opcode_name(request.opcode));
    if (outcome != Outcome::kAnswered) return status;
    if (reply->status != COLLX_OK) return Status(reply->status, reply->message);
    return Status::Ok();
  }

  Status set(const std::string& key, const Bytes& value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(value));
    Request request;
    request.opcode = Opcode::kSet;
    request.key = key;
    request.value = value;
    Reply reply;
    return call(request, operation_deadline(), &reply);
  }

  Status get(const std::string& key, Bytes* value, Deadline deadline) override {
    if (value == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "store get: value is null");
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    Request request;
    request.opcode = Opcode::kGet;
    request.key = key;
    request.timeout_ms = deadline.is_never() ? -1 : deadline.remaining_ms();
    Reply reply;
    const int64_t start_us = monotonic_us();
    Status status = call(request, with_grace(deadline), &reply);
    if (status.code() == COLLX_ERR_TIMEOUT && reply.status == COLLX_OK)  // the server never answered
      return store_timeout_status("get", store_elapsed_ms(start_us), key)
          .with_context("no answer from the store server at " + address_ + ": ");
    COLLX_RETURN_IF_ERROR(status);
    *value = std::move(reply.value);
    return Status::Ok();
  }

  Status add(const std::string& key, int64_t delta, int64_t* new_value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    Request request;
    request.opcode = Opcode::kAdd;
    request.key = key;
    request.delta = delta;
    Reply reply;
    COLLX_RETURN_IF_ERROR(call(request, operation_deadline(), &reply));
    if (new_value) *new_value = reply.new_value;
    return Status::Ok();
  }

  Status compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                     Bytes* current) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(expected, "expected value"));
    COLLX_RETURN_IF_ERROR(validate_store_value(desired, "desired value"));
    Request request;
    request.opcode = Opcode::kCompareSet;
    request.key = key;
    request.expected = expected;
    request.value = desired;
    Reply reply;
    COLLX_RETURN_IF_ERROR(call(request, operation_deadline(), &reply));
    if (current) *current = std::move(reply.value);
    return Status::Ok();
  }

  Status wait(const std::vector<std::string>& keys, Deadline deadline) override {
    COLLX_RETURN_IF_ERROR(validate_store_keys(keys));
    Request request;
    request.opcode = Opcode::kWait;
    request.keys = keys;
    request.timeout_ms = deadline.is_never() ? -1 : deadline.remaining_ms();
    Reply reply;
    const int64_t start_us = monotonic_us();
    Status status = call(request, with_grace(deadline), &reply);
    if (status.code() == COLLX_ERR_TIMEOUT && reply.status == COLLX_OK && !keys.empty())
      return store_timeout_status("wait", store_elapsed_ms(start_us), keys[0])
          .with_context("no answer from the store server at " + address_ + " (it may hold more keys): ");
    return status;
  }

  Status remove(const std::string& key) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    Request request;
    request.opcode = Opcode::kDelete;
    request.key = key;
    Reply reply;
    return call(request, operation_deadline(), &reply);
  }

 private:
  Deadline operation_deadline() const { return Deadline::after_ms(operation_timeout_ms_); }
  static Deadline with_grace(const Deadline& deadline) {
    if (deadline.is_never()) return deadline;
    return Deadline::after_ms(deadline.remaining_ms() + kServerAnswerGraceMs);
  }

  // Runs one request on an idle (or new) connection. A server-side error comes back as the
  // status with reply->status set; a client-side timeout as COLLX_ERR_TIMEOUT with
  // reply->status still COLLX_OK.
  Status call(Request& request, Deadline deadline, Reply* reply) {
    std::unique_ptr<Connection> connection;
    COLLX_RETURN_IF_ERROR(take_connection(deadline, &connection));
    Status status;
    Outcome outcome = exchange(address_, connection.get(), request, deadline, reply, &status);
    switch (outcome) {
      case Outcome::kAnswered:
        give_back(std::move(connection));
        return reply->status == COLLX_OK ? Status::Ok() : Status(reply->status, reply->message);
      case Outcome::kTimedOut:
        give_back(std::move(connection));
        return make_status(COLLX_ERR_TIMEOUT, "store %s: no answer from the store server at %s before the deadline",
                           opcode_name(request.opcode), address_.c_str());
      case Outcome::kServerGone: {
        std::lock_guard<std::mutex> lock(mutex_);
        if (gone_.ok()) gone_ = status;
        idle_.clear();
        return status;
      }
      case Outcome::kBroken:
        return status;  // this connection is dropped; others (and new ones) may still work
    }
    return status;
  }

  Status take_connection(const Deadline& deadline, std::unique_ptr<Connection>* out) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!gone_.ok()) return gone_;
      if (!idle_.empty()) {
        *out = std::move(idle_.back());
        idle_.pop_back();
        return Status::Ok();
      }
    }
    // The server answered before, so a refusal now means it is gone: no retries.
    return open_connection(address_, token_, deadline, /*retry_refused=*/false, out);
  }

  void give_back(std::unique_ptr<Connection> connection) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (gone_.ok()) idle_.push_back(std::move(connection));
  }

  static Outcome exchange(const std::string& address, Connection* c, Request& request, const Deadline& deadline,
                          Reply* reply, Status* status);
  static Status server_gone(const std::string& address, int error);

  const std::string address_;
  const std::string token_;  // the job token; empty = none
  const int64_t operation_timeout_ms_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  Status gone_;  // set once the server closed a connection: every later call fails with it
};

Status TcpStoreClient::server_gone(const std::string& address, int error) {
  if (error == 0) return make_status(COLLX_ERR_REMOTE, "the store server at %s closed the connection", address.c_str());
  return make_status(COLLX_ERR_REMOTE, "the store server at %s closed the connection: %s", address.c_str(),
                     std::strerror(error));
}

Outcome TcpStoreClient::exchange(const std::string& address, Connection* c, Request& request,
                                 const Deadline& deadline, Reply* reply, Status* status) {
  request.request_id = c->next_request_id++;
  encode_request(request, &c->unsent);
  while (c->unsent_start < c->unsent.size()) {
    ssize_t n = send_some(c->fd.get(), c->unsent.data() + c->unsent_start, c->unsent.size() - c->unsent_start);
    if (n < 0) {
      *status = server_gone(address, errno);
      return Outcome::kServerGone;
    }
    if (n == 0 && !poll_fd(c->fd.get(), POLLOUT, deadline).ok()) return Outcome::kTimedOut;
    c->unsent_start += static_cast<size_t>(n);
  }
  c->unsent.clear();
  c->unsent_start = 0;

  while (true) {
    size_t frame_bytes = 0;
    Status decoded = decode_reply(c->received.data() + c->received_start, c->received.size() - c->received_start,
                                  reply, &frame_bytes);
    if (!decoded.ok()) {
      *status = decoded.with_context("store server at " + address + " sent a malformed reply: ");
      return Outcome::kBroken;
    }
    if (frame_bytes > 0) {
      c->received_start += frame_bytes;
      if (c->received_start == c->received.size()) {
        c->received.clear();
        c->received_start = 0;
      }
      if (reply->request_id != request.request_id) {  // the answer to an abandoned call
        *reply = Reply();
        continue;
      }
      if (reply->opcode != request.opcode) {
        *status = make_status(COLLX_ERR_PROTOCOL, "store server at %s answered %s with a %s reply", address.c_str(),
                              opcode_name(request.opcode), opcode_name(reply->opcode));
        return Outcome::kBroken;
      }
      return Outcome::kAnswered;
    }
    if (c->received_start > 0) {
      c->received.erase(c->received.begin(), c->received.begin() + static_cast<std::ptrdiff_t>(c->received_start));
      c->received_start = 0;
    }
    const size_t old_size = c->received.size();
    // Size the buffer for a large reply once rather than doubling up to it.
    c->received.reserve(peek_frame_bytes(c->received.data(), old_size, true) + kReceiveChunkBytes);
    c->received.resize(old_size + kReceiveChunkBytes);
    ssize_t n = recv_some(c->fd.get(), c->received.data() + old_size, kReceiveChunkBytes);
    c->received.resize(old_size + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n == 0) {
      *status = server_gone(address, 0);
      return Outcome::kServerGone;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *status = server_gone(address, errno);
        return Outcome::kServerGone;
      }
      if (!poll_fd(c->fd.get(), POLLIN, deadline).ok()) return Outcome::kTimedOut;
    }
  }
}

}  // namespace

Status connect_tcp_store(const std::string& address, Deadline deadline, std::shared_ptr<Store>* out) {
  std::string token;
  COLLX_RETURN_IF_ERROR(auth::job_token_from_settings(&token));
  return connect_tcp_store(address, token, deadline, out);
}

Status connect_tcp_store(const std::string& address, const std::string& job_token, Deadline deadline,
                         std::shared_ptr<Store>* out) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "connect_tcp_store: out is null");
  COLLX_RETURN_IF_ERROR(auth::check_token_usable(job_token));
  COLLX_RETURN_IF_ERROR(auth::check_token_required(job_token, "TCP store client of " + address));
  std::unique_ptr<Connection> connection;
  COLLX_RETURN_IF_ERROR(TcpStoreClient::open_connection(address, job_token, deadline, /*retry_refused=*/true,
                                                        &connection));
  COLLX_TRACE(STORE, "store client connected to %s", address.c_str());
  *out = std::make_shared<TcpStoreClient>(address, job_token, std::move(connection), store_operation_timeout_ms());
  return Status::Ok();
}

}  // namespace collx
