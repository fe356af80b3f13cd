// The bootstrap key-value store: how ranks find each other. Three implementations share
// this interface: TCP (a small server plus clients), files in a shared directory, and
// process memory (ranks as threads in tests).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {

using Bytes = std::vector<uint8_t>;

// Limits enforced by every implementation (and checked on the wire before allocating).
constexpr size_t kStoreMaxKeyBytes = 4096;
constexpr size_t kStoreMaxValueBytes = 64u << 20;
// Most keys one wait() may name.
constexpr size_t kStoreMaxWaitKeys = 4096;

// All methods are thread-safe. Every blocking method ends by its deadline with
// COLLX_ERR_TIMEOUT naming the key(s) it waited for.
class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(const std::string& key, const Bytes& value) = 0;
  // Waits for the key to exist, then returns its value.
  virtual Status get(const std::string& key, Bytes* value, Deadline deadline) = 0;
  // Treats the value as a decimal int64 (missing = 0), adds delta, stores and returns it.
  virtual Status add(const std::string& key, int64_t delta, int64_t* new_value) = 0;
  // If the key's value equals `expected` (or the key is missing and `expected` is empty),
  // store `desired`. Returns in *current the value stored after the call (empty when the key
  // is still missing; torch's TCPStore echoes `expected` there instead).
  virtual Status compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                             Bytes* current) = 0;
  // Waits until every key exists.
  virtual Status wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
  // Removes the key; removing a missing key is not an error.
  virtual Status remove(const std::string& key) = 0;
};

// A TCP store client connected to "host:port" (retrying until the deadline while nothing
// listens there yet, or the server closes connections before answering them). Calls without a deadline of their own (set, add, compare_set, remove)
// are bounded by COLLX_TIMEOUT_MS. Once the server closes a connection every call fails with
// COLLX_ERR_REMOTE naming the address.
// With a job token (COLLX_JOB_TOKEN, or `job_token` in the second form; empty = none) the
// client and server prove to each other that they know it before any request is processed
// (docs/security.md); a token on one side only, or a different one, is COLLX_ERR_PROTOCOL
// saying so. A set token in a build without OpenSSL is COLLX_ERR_UNSUPPORTED; no token with
// COLLX_REQUIRE_TOKEN=1 is COLLX_ERR_INVALID_USAGE.
Status connect_tcp_store(const std::string& address, Deadline deadline, std::shared_ptr<Store>* out);
Status connect_tcp_store(const std::string& address, const std::string& job_token, Deadline deadline,
                         std::shared_ptr<Store>* out);

// What a TCP store server has refused or dropped to protect itself, for logs and tests.
struct TcpStoreServerCounters {
  uint64_t handshaking_connections = 0;  // now: accepted, not authenticated yet
  uint64_t refused_connections = 0;      // closed at accept: too many were handshaking
  uint64_t handshake_timeouts = 0;       // dropped: not authenticated by the handshake deadline
  uint64_t refused_handshakes = 0;       // dropped: another request before AUTH, or a wrong token
  uint64_t allocation_failures = 0;      // dropped: memory ran out while serving them
  // The most input bytes (allocated buffer) any connection held before it authenticated.
  uint64_t max_unauthenticated_input_bytes = 0;
};

// A TCP store server listening on "host:port" ("0.0.0.0:port" or "*:port" for all
// interfaces; port 0 picks a free port). Serves until destroyed.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
  // A client of this very server.
  virtual Status connect(Deadline deadline, std::shared_ptr<Store>* out) = 0;
  // Thread-safe snapshot.
  virtual TcpStoreServerCounters counters() const = 0;
};

struct TcpStoreServerOptions {
  // Required from every client when not empty: a client that fails is dropped, with a
  // warning, before any of its requests (docs/security.md). Until then a connection may send
  // only the handshake (HELLO, AUTH; a few dozen bytes), must finish it within
  // handshake_timeout_ms, and at most max_handshaking_connections may be at that stage: a
  // connection beyond them is closed at once (a collx client retries until its deadline).
  std::string job_token;
  int64_t handshake_timeout_ms = 5000;
  uint64_t max_handshaking_connections = 64;
  // What the store may hold (COLLX_STORE_MAX_KEYS, COLLX_STORE_MAX_BYTES): a write beyond it
  // fails with COLLX_ERR_NO_MEMORY naming the limit.
  uint64_t max_keys = 1000000;
  uint64_t max_bytes = 1ull << 30;
  // Tests only: runs on the server thread before each request is served; it may throw (say
  // std::bad_alloc) to show that a failure there drops only that request's connection.
  std::function<void()> before_request;
};

// The options from COLLX_JOB_TOKEN, COLLX_STORE_MAX_KEYS and COLLX_STORE_MAX_BYTES.
Status tcp_store_server_options_from_settings(TcpStoreServerOptions* out);

// COLLX_ERR_SYSTEM naming errno when the address cannot be bound; `*address_in_use` is set
// when another process may serve it (EADDRINUSE: the port is taken; EADDRNOTAVAIL: the
// address belongs to another host), so callers can connect to that server instead.
// Without a job token: COLLX_ERR_INVALID_USAGE when COLLX_REQUIRE_TOKEN=1, and a warning
// (once per process) when the address is not loopback. The first two forms take the options
// from the settings (the second with `job_token` instead of COLLX_JOB_TOKEN).
Status start_tcp_store_server(const std::string& address, std::unique_ptr<TcpStoreServer>* out,
                              bool* address_in_use = nullptr);
Status start_tcp_store_server(const std::string& address, const std::string& job_token,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use = nullptr);
Status start_tcp_store_server(const std::string& address, const TcpStoreServerOptions& options,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use = nullptr);

std::shared_ptr<Store> make_memory_store();
Status make_file_store(const std::string& directory, std::shared_ptr<Store>* out);

}  // namespace collx
