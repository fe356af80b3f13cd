// One server connection's handshake on a TCP store with a job token, as a pure state machine
// (no sockets, no clock) so that it can be unit-tested and fuzzed on its own
// (fuzz/store_handshake_fuzz.cc). Until the connection has proved it knows the token it may
// send one HELLO and then one AUTH answering that HELLO's challenge, nothing else, and the
// server holds at most kMaxInputBytes of its input: a stranger cannot make the server buffer
// a large frame before the token is checked. Without a token every connection is
// authenticated from the start and only HELLO is answered here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"
#include "lib/store/store_wire.h"

namespace collx {

class StoreHandshake {
 public:
  // The AUTH body: the client's nonce and MAC, each a u32 length and 32 bytes.
  static constexpr size_t kAuthBodyBytes = 2 * (4 + 32);
  // The most input held before authentication: a HELLO frame (no body) and an AUTH frame.
  static constexpr size_t kMaxInputBytes = 2 * store_wire::kHeaderBytes + kAuthBodyBytes;

  // `token` empty: no authentication (the connection starts authenticated).
  explicit StoreHandshake(std::string token = "");

  bool authenticated() const { return authenticated_; }

  // How many more input bytes the server may hold for this connection, which holds `held`
  // bytes (unparsed or not yet released) now; unlimited (SIZE_MAX) once authenticated.
  size_t input_room(size_t held) const;

  // Before authentication, checks the frame that starts at data[0, size) from its header
  // alone, before its body is read: only HELLO (once) and AUTH may come. COLLX_ERR_PROTOCOL
  // naming the opcode otherwise. OK while the header is incomplete, and after authentication.
  Status screen(const uint8_t* data, size_t size) const;

  // Answers HELLO and AUTH into *reply (*answered = true); any other request passes
  // (*answered = false) once authenticated. An error means: refuse the request with it and
  // drop the connection (wrong token, a request before authenticating, a second HELLO or
  // AUTH before authenticating).
  Status on_request(const store_wire::Request& request, store_wire::Reply* reply, bool* answered);

 private:
  std::string token_;
  bool authenticated_;
  bool hello_answered_ = false;
  Bytes challenge_;  // of the last HELLO; cleared by the AUTH that answers it
};

}  // namespace collx
