// One client connection of the TCP store server: its socket, its input and output buffers,
// and the GET or WAIT it may be parked on. The limits here are what keep a slow or hostile
// client from making the server buffer without bound.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "lib/store/store.h"
#include "lib/store/store_handshake.h"
#include "lib/store/store_wire.h"
#include "lib/common/unique_fd.h"

namespace collx {

struct ServerConnection {
  using Clock = std::chrono::steady_clock;

  static constexpr size_t kReadChunkBytes = 64 << 10;
  // While a connection cannot process its next request (it waits for keys, or its client does
  // not read its replies), reading stops once this much input is buffered: a client cannot make
  // the server buffer without bound.
  static constexpr size_t kMaxBlockedInputBytes = 64 << 10;
  // Replies queued for a client that does not read them; past this its requests wait.
  static constexpr size_t kMaxQueuedOutputBytes = 1 << 20;

  uint64_t id = 0;
  UniqueFd fd;
  std::string peer;
  Bytes input;  // bytes [input_start, end) are not parsed yet
  size_t input_start = 0;
  Bytes output;  // bytes [output_start, end) are not sent yet
  size_t output_start = 0;
  uint32_t registered_events = 0;
  bool closing = false;  // send what is queued (an error reply), then close
  // Job token: until the handshake authenticates it, a connection may send only HELLO and
  // AUTH, and holds little input. Authenticated from the start on a server without a token.
  StoreHandshake handshake;

  // A GET or WAIT held until its keys exist: `parked` names the one missing now.
  bool waiting = false;
  store_wire::Request parked;
  size_t missing_index = 0;
  bool has_timeout = false;
  std::multimap<Clock::time_point, uint64_t>::iterator timeout_entry;

  size_t unparsed() const { return input.size() - input_start; }
  size_t queued() const { return output.size() - output_start; }
  bool blocked() const { return waiting || queued() > kMaxQueuedOutputBytes; }
  bool wants_read() const { return !closing && (!blocked() || unparsed() < kMaxBlockedInputBytes); }
};

}  // namespace collx
