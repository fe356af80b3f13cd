// The bootstrap key-value store: how ranks find each other. Three implementations share
// this interface: TCP (a small server plus clients), files in a shared directory, and
// process memory (ranks as threads in tests).
#pragma once

#include <cstdint>
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
// listens there yet). Calls without a deadline of their own (set, add, compare_set, remove)
// are bounded by COLLX_TIMEOUT_MS. Once the server closes a connection every call fails with
// COLLX_ERR_REMOTE naming the address.
// With a job token (COLLX_JOB_TOKEN, or `job_token` in the second form; empty = none) the
// client and server prove to each other that they know it before any request is processed
// (docs/security.md); a token on one side only, or a different one, is COLLX_ERR_PROTOCOL
// saying so. A set token in a build without OpenSSL is COLLX_ERR_UNSUPPORTED.
Status connect_tcp_store(const std::string& address, Deadline deadline, std::shared_ptr<Store>* out);
Status connect_tcp_store(const std::string& address, const std::string& job_token, Deadline deadline,
                         std::shared_ptr<Store>* out);

// A TCP store server listening on "host:port" ("0.0.0.0:port" or "*:port" for all
// interfaces; port 0 picks a free port). Serves until destroyed.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
  // A client of this very server.
  virtual Status connect(Deadline deadline, std::shared_ptr<Store>* out) = 0;
};
// COLLX_ERR_SYSTEM naming errno when the address cannot be bound; `*address_in_use` is set
// when another process may serve it (EADDRINUSE: the port is taken; EADDRNOTAVAIL: the
// address belongs to another host), so callers can connect to that server instead.
// The server requires the job token (COLLX_JOB_TOKEN, or `job_token`) from every client when
// it is not empty: a client that fails is dropped, with a warning, before any of its requests.
Status start_tcp_store_server(const std::string& address, std::unique_ptr<TcpStoreServer>* out,
                              bool* address_in_use = nullptr);
Status start_tcp_store_server(const std::string& address, const std::string& job_token,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use = nullptr);

std::shared_ptr<Store> make_memory_store();
Status make_file_store(const std::string& directory, std::shared_ptr<Store>* out);

}  // namespace collx
