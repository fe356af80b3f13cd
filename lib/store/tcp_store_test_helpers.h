// Helpers shared by the TCP store tests (header-only: every .cc in lib/store that is not a
// test goes into the library).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include "lib/common/log.h"
#include "lib/store/store.h"
#include "lib/store/store_wire.h"
#include "lib/common/unique_fd.h"
#include "tests/support/test_env.h"

namespace collx {
namespace store_testing {

using namespace store_wire;

inline Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
inline std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }
inline int64_t elapsed_ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

inline std::unique_ptr<TcpStoreServer> start_server(const std::string& address = "127.0.0.1:0") {
  std::unique_ptr<TcpStoreServer> server;
  Status status = start_tcp_store_server(address, &server);
  EXPECT_TRUE(status.ok()) << status.message();
  return server;
}

inline std::shared_ptr<Store> connect_client(TcpStoreServer* server) {
  std::shared_ptr<Store> store;
  Status status = server->connect(Deadline::after_ms(10000), &store);
  EXPECT_TRUE(status.ok()) << status.message();
  return store;
}

// A port nothing listens on (bound, read back, released).
inline int free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return -1;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

// A plain blocking socket to the server, speaking whatever the test sends.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    timeval timeout{5, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  // "127.0.0.1:<port>" as the server sees this client.
  std::string local_address() const {
    sockaddr_in address{};
    socklen_t length = sizeof address;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    return "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  }
  void send_bytes(const Bytes& bytes) {
    ASSERT_EQ(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Like send_bytes, but false instead of a failure once the server has closed the connection.
  bool try_send(const Bytes& bytes) {
    return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  void close() { fd_.reset(); }
  // Everything the server sends until it closes the connection; false if it has not closed
  // it within 5 s.
  bool read_until_closed(Bytes* received) {
    uint8_t buffer[4096];
    while (true) {
      ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      received->insert(received->end(), buffer, buffer + n);
    }
  }
  // The one reply the server sends before it closes the connection: false when it sent
  // anything else or more, or did not close within 5 s.
  bool read_final_reply(Reply* reply) {
    Bytes received;
    if (!read_until_closed(&received)) return false;
    size_t frame_bytes = 0;
    return decode_reply(received.data(), received.size(), reply, &frame_bytes).ok() && frame_bytes > 0 &&
           frame_bytes == received.size();
  }
  // The next reply frame (false on timeout or close).
  bool read_reply(Reply* reply) {
    while (true) {
      size_t frame_bytes = 0;
      Status status = decode_reply(pending_.data(), pending_.size(), reply, &frame_bytes);
      EXPECT_TRUE(status.ok()) << status.message();
      if (!status.ok()) return false;
      if (frame_bytes > 0) {
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(frame_bytes));
        return true;
      }
      uint8_t buffer[4096];
      ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n <= 0) return false;
      pending_.insert(pending_.end(), buffer, buffer + n);
    }
  }

 private:
  UniqueFd fd_;
  Bytes pending_;
};

inline Bytes frame_of(const Request& request) {
  Bytes out;
  encode_request(request, &out);
  return out;
}

inline Request make_request(Opcode opcode, uint32_t id, const std::string& key = "", const std::string& value = "") {
  Request request;
  request.opcode = opcode;
  request.request_id = id;
  request.key = key;
  request.value = bytes_of(value);
  return request;
}

// Routes this process's log to a file for the duration of a test.
class CapturedLog {
 public:
  CapturedLog() : path_(testing::make_temp_dir("collx_store_log_") + "/log.txt") {
    ::setenv("COLLX_DEBUG_FILE", path_.c_str(), 1);
    ::setenv("COLLX_DEBUG", "WARN", 1);
    log_reload_settings();
  }
  ~CapturedLog() {
    ::unsetenv("COLLX_DEBUG_FILE");
    log_reload_settings();
    std::system(("rm -rf \"$(dirname '" + path_ + "')\"").c_str());
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream contents;
    contents << in.rdbuf();
    return contents.str();
  }

 private:
  std::string path_;
};

inline void expect_store_works(Store* store, const std::string& key) {
  ASSERT_TRUE(store->set(key, bytes_of("value of " + key)).ok());
  Bytes value;
  Status status = store->get(key, &value, Deadline::after_ms(5000));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(text_of(value), "value of " + key);
}


}  // namespace store_testing
}  // namespace collx
