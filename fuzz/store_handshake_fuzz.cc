// libFuzzer target for the TCP store server's connection state machine before and through
// authentication (lib/store/store_handshake.h), driven the way tcp_store_server.cc drives it:
// input arrives in chunks no larger than the handshake allows, each frame is screened from its
// header, decoded, then given to the handshake. Build and run with fuzz/run.sh store_handshake.
// Input: byte 0 chooses the mode (bit 0: the server has a job token; bit 1: the harness
// answers each AUTH with the right MAC for the last challenge, as a client that knows the
// token would; bits 2-7: the chunk size), the rest is what the client sends.
// Properties: before authentication the connection never holds more than kMaxInputBytes, no
// request other than HELLO and AUTH gets past the handshake, only a right MAC authenticates,
// and every refusal is COLLX_ERR_PROTOCOL.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "lib/common/auth.h"
#include "lib/store/store_handshake.h"
#include "lib/store/store_wire.h"

using namespace collx;
using namespace collx::store_wire;

namespace {

constexpr const char* kToken = "fuzz-job-token";

void check(bool condition) {
  if (!condition) std::abort();
}

// The AUTH of a client that knows the token, for `challenge` (empty when no HELLO was answered).
void answer_rightly(const Bytes& challenge, Request* request) {
  if (challenge.size() != auth::kNonceBytes) return;
  auth::Nonce server{}, client{};
  std::copy(challenge.begin(), challenge.end(), server.begin());
  std::copy_n(request->nonce.begin(), std::min(request->nonce.size(), client.size()), client.begin());
  auth::Mac mac{};
  if (!auth::compute_mac(kToken, server, client, auth::Role::kClient, &mac).ok()) return;
  request->mac.assign(mac.begin(), mac.end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool with_token = (data[0] & 1) != 0 && auth::available();
  const bool right_macs = (data[0] & 2) != 0;
  const size_t chunk_bytes = 1 + (data[0] >> 2);
  ++data;
  --size;

  StoreHandshake handshake(with_token ? kToken : "");
  Bytes held;
  size_t parsed = 0;
  Bytes challenge;
  size_t offset = 0;
  while (offset < size) {
    const size_t room = handshake.input_room(held.size());
    if (room == 0) return 0;  // the server stops reading; the handshake deadline drops it
    const size_t take = std::min({room, chunk_bytes, size - offset});
    held.insert(held.end(), data + offset, data + offset + take);
    offset += take;
    if (!handshake.authenticated()) check(held.size() <= StoreHandshake::kMaxInputBytes);
    while (true) {
      Status status = handshake.screen(held.data() + parsed, held.size() - parsed);
      if (!status.ok()) {
        check(status.code() == COLLX_ERR_PROTOCOL && !handshake.authenticated());
        return 0;  // refused from the header: the connection is dropped
      }
      Request request;
      size_t frame_bytes = 0;
      status = decode_request(held.data() + parsed, held.size() - parsed, &request, &frame_bytes);
      if (!status.ok()) {
        check(status.code() == COLLX_ERR_PROTOCOL);
        return 0;
      }
      if (frame_bytes == 0) break;
      parsed += frame_bytes;
      const bool was_authenticated = handshake.authenticated();
      const bool answered_rightly = right_macs && request.opcode == Opcode::kAuth && !challenge.empty();
      if (answered_rightly) answer_rightly(challenge, &request);
      Reply reply;
      bool answered = false;
      status = handshake.on_request(request, &reply, &answered);
      if (request.opcode == Opcode::kAuth) challenge.clear();
      if (!status.ok()) {
        check(status.code() == COLLX_ERR_PROTOCOL);
        return 0;
      }
      check(answered == (request.opcode == Opcode::kHello || request.opcode == Opcode::kAuth));
      if (!was_authenticated) {
        check(answered);  // nothing but the handshake is served before authentication
        if (handshake.authenticated()) check(answered_rightly);  // a guessed MAC never authenticates
      }
      if (request.opcode == Opcode::kHello) {
        check(reply.challenge.size() == (with_token ? auth::kNonceBytes : 0u));
        challenge = reply.challenge;
      }
    }
    if (parsed == held.size()) {
      held.clear();
      parsed = 0;
    }
  }
  return 0;
}
