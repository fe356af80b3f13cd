#include "bindings/torch/csrc/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings/torch/csrc/collx_error.h"

namespace collx_torch {

namespace {

constexpr int kPortAttempts = 16;

// A port nothing listens on right now (bound to port 0, read back, released). Another
// process may take it before the store binds it: host_store retries with a new one.
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// This host's name as peers can reach it; the loopback address where the name does not
// resolve (a container without a hosts entry: then only ranks of this host can join).
std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &found) != 0) return "127.0.0.1";
  ::freeaddrinfo(found);
  return name;
}

// Rank 0: a collx TCP store server on every interface; *published gets "hostname:port".
collx_store_t host_store(int64_t timeout_ms, std::string* published) {
  collx_status_t status = COLLX_ERR_SYSTEM;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    int port = pick_free_port();
    if (port == 0) continue;
    collx_store_t store = nullptr;
    status = collx_store_create_tcp(("0.0.0.0:" + std::to_string(port)).c_str(), 1, timeout_ms, &store);
    if (status == COLLX_OK) {
      *published = host_name() + ":" + std::to_string(port);
      return store;
    }
    if (status != COLLX_ERR_SYSTEM) break;  // not a port race: retrying will not help
  }
  throw error_from_status(status, nullptr, "process group bootstrap (hosting the collx store)");
}

collx_store_t join_store(const std::string& address, int64_t timeout_ms) {
  collx_store_t store = nullptr;
  collx_status_t status = collx_store_create_tcp(address.c_str(), 0, timeout_ms, &store);
  check_status(status, nullptr, "process group bootstrap (connecting to the collx store at " + address + ")");
  return store;
}

}  // namespace

GroupHandles::~GroupHandles() {
  collx_comm_destroy(comm_);
  collx_store_destroy(store_);
}

std::unique_ptr<GroupHandles> create_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds timeout) {
  const int64_t timeout_ms = timeout.count() > 0 ? timeout.count() : -1;
  std::unique_ptr<collx_store_s, decltype(&collx_store_destroy)> collx_store(nullptr, &collx_store_destroy);
  if (rank == 0) {
    std::string address;
    collx_store.reset(host_store(timeout_ms, &address));
    store->set(kStoreAddressKey, std::vector<uint8_t>(address.begin(), address.end()));
  } else {
    std::vector<uint8_t> value = store->get(kStoreAddressKey);  // bounded by the c10d store's timeout
    collx_store.reset(join_store(std::string(value.begin(), value.end()), timeout_ms));
  }

  collx_config_t config;
  collx_config_init(&config, sizeof config);
  config.rank = rank;
  config.world_size = size;
  config.store = collx_store.get();
  config.timeout_ms = timeout_ms;
  config.name = "torch";
  collx_comm_t comm = nullptr;
  check_status(collx_comm_create(&config, &comm), nullptr,
               "process group creation (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")");
  return std::make_unique<GroupHandles>(collx_store.release(), comm);
}

}  // namespace collx_torch
