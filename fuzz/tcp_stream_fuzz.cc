// libFuzzer target for the TCP transport's receive stream (transports/tcp/tcp_recv.cc): the
// state machine that reads frames from a peer's sockets, announces messages on socket 0,
// matches them to receives or buffers them within the unexpected budget, pauses a socket that
// runs ahead of socket 0 or of the budget, and takes POISON and GOODBYE. tcp_wire checks one
// header at a time; this target feeds whole streams to a real engine (rank 0 of 2) over
// socket pairs standing in for rank 1's connections.
//
// Input: one configuration byte (sockets per peer, unexpected budget, the receives rank 0
// posts), then operations until the input ends, each appending to one socket's stream:
//   DATA frame     msg id, tag, message bytes, fragment offset and bytes, then that many
//                  payload bytes from the input (fewer when it ends: a frame cut off)
//   POISON frame   status code and text
//   GOODBYE frame
//   raw bytes      anything at all
// The streams are written, rank 1's ends closed, and every receive waited for.
// Properties: no crash and no access outside a buffer (ASan); every wait ends, by its
// deadline at the latest, and a failure says why (a timeout names rank 1).
//
// Known, left to the TCP transport (corpus: fragment_never_announced_after_goodbye): a
// fragment on socket 1 of a message socket 0 never announces, with socket 0 ended by
// GOODBYE, pauses socket 1 for good; the receive then ends only by its deadline instead of
// failing at once. The short deadline here keeps such inputs cheap.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transports/tcp/tcp_engine.h"

using namespace collx;
using namespace collx::tcp;

namespace {

constexpr size_t kMaxStreamBytes = 64 << 10;  // fits a socket pair's buffer: writes never block
constexpr int kDeadlineMs = 300;

struct Input {
  const uint8_t* data;
  size_t size;
  uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  uint16_t u16() { return static_cast<uint16_t>(byte() | (byte() << 8)); }
  void take(size_t n, std::string* out) {
    n = n < size ? n : size;
    out->append(reinterpret_cast<const char*>(data), n);
    data += n;
    size -= n;
  }
};

void append_frame(const FrameHeader& h, Input& in, size_t payload, std::string* stream) {
  uint8_t bytes[kFrameHeaderBytes];
  encode_frame_header(h, bytes);
  stream->append(reinterpret_cast<const char*>(bytes), sizeof bytes);
  in.take(payload, stream);
}

// Appends one operation's bytes to the stream of the socket it names.
void next_operation(Input& in, std::vector<std::string>* streams) {
  const uint8_t op = in.byte();
  std::string& stream = (*streams)[(op >> 7) % streams->size()];
  FrameHeader h;
  h.src_rank = 1;
  switch (op & 3) {
    case 0: {
      h.type = FrameType::kData;
      h.msg_id = in.byte();
      h.tag = in.byte() & 3;
      h.msg_bytes = in.u16();
      h.frag_offset = in.u16();
      h.frag_bytes = in.u16();
      append_frame(h, in, h.frag_bytes, &stream);
      break;
    }
    case 1: {
      h.type = FrameType::kPoison;
      h.tag = static_cast<uint64_t>(-static_cast<int64_t>(in.byte() % 16));
      h.frag_bytes = in.byte();
      h.msg_bytes = h.frag_bytes;  // as a failing rank sends it: the text is the whole message
      append_frame(h, in, h.frag_bytes, &stream);
      break;
    }
    case 2:
      h.type = FrameType::kGoodbye;
      append_frame(h, in, 0, &stream);
      break;
    default:
      in.take(in.byte(), &stream);
      break;
  }
}

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const uint8_t config = in.byte();
  TcpTransportParams params;
  params.rank = 0;
  params.size = 2;
  params.comm_id = 77;
  params.sockets_per_peer = 1 + (config & 1);
  params.unexpected_max_bytes = (config & 2) ? 100 : (1 << 20);  // small: pauses for budget

  MeshSockets sockets(2);
  std::vector<UniqueFd> peer_ends;
  for (int i = 0; i < params.sockets_per_peer; ++i) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
    ::fcntl(pair[0], F_SETFL, O_NONBLOCK);  // the engine's end, as build_mesh leaves it
    sockets[1].emplace_back(pair[0]);
    peer_ends.emplace_back(pair[1]);
  }
  std::vector<SocketAddress> addresses(2);
  UniqueFd listener(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));  // never readable: no late connections
  auto engine = std::make_unique<TcpEngine>(params, std::move(listener), SocketAddress(), addresses,
                                            std::move(sockets));
  if (!engine->init().ok()) std::abort();

  std::vector<std::string> streams(static_cast<size_t>(params.sockets_per_peer));
  while (in.size > 0 && streams[0].size() < kMaxStreamBytes && streams.back().size() < kMaxStreamBytes)
    next_operation(in, &streams);
  for (size_t i = 0; i < streams.size(); ++i) {
    if (!write_all(peer_ends[i].get(), streams[i])) std::abort();
    peer_ends[i].reset();  // end of rank 1's stream
  }

  // Receives by tag (config bits 2..4), each 300 bytes, posted after the bytes arrived so
  // that both the matched and the unexpected paths run.
  std::vector<std::unique_ptr<transport::Request>> requests;
  std::vector<std::vector<uint8_t>> buffers;
  for (uint64_t tag = 0; tag < 3; ++tag) {
    if ((config >> (2 + tag) & 1) == 0) continue;
    requests.push_back(std::make_unique<transport::Request>());
    buffers.emplace_back(300);
    Status st = engine->post_recv(requests.back().get(), 1, tag, buffers.back().data(), buffers.back().size(),
                                  transport::OpDesc{});
    if (!st.ok() && st.message().empty()) std::abort();
    if (!st.ok()) requests.pop_back();
  }
  // wait_all returns at the first failure: wait again for the rest, each time for a request
  // fewer.
  const Deadline deadline = Deadline::after_ms(kDeadlineMs);
  for (;;) {
    std::vector<transport::Request*> pending;
    for (auto& r : requests)
      if (!r->done()) pending.push_back(r.get());
    if (pending.empty()) break;
    const Status waited = engine->wait_all(pending.data(), pending.size(), deadline);
    if (waited.code() == COLLX_ERR_TIMEOUT) {
      if (waited.message().find("rank 1") == std::string::npos) std::abort();
      break;
    }
    if (!waited.ok() && waited.message().empty()) std::abort();
    size_t still = 0;
    for (transport::Request* r : pending) still += r->done() ? 0 : 1;
    if (still == pending.size()) std::abort();  // a failure that ended no request
  }
  for (auto& r : requests)
    if (r->done() && !r->status().ok() && r->status().message().empty()) std::abort();
  engine->abort();
  engine.reset();  // fails what is still pending while the requests and buffers still exist
  return 0;
}
