#include "lib/store/store_handshake.h"

#include <limits>

#include "lib/common/auth.h"
#include "lib/store/store_auth.h"

namespace collx {

using store_wire::Opcode;

static_assert(StoreHandshake::kAuthBodyBytes == 2 * (4 + auth::kNonceBytes), "AUTH body: nonce and MAC fields");

StoreHandshake::StoreHandshake(std::string token) : token_(std::move(token)), authenticated_(token_.empty()) {}

size_t StoreHandshake::input_room(size_t held) const {
  if (authenticated_) return std::numeric_limits<size_t>::max();
  return held >= kMaxInputBytes ? 0 : kMaxInputBytes - held;
}

Status StoreHandshake::screen(const uint8_t* data, size_t size) const {
  if (authenticated_ || size < store_wire::kHeaderBytes) return Status::Ok();
  store_wire::Header header;
  COLLX_RETURN_IF_ERROR(store_wire::decode_header(data, size, false, &header));
  const auto opcode = static_cast<Opcode>(header.opcode);
  if (opcode == Opcode::kAuth || (opcode == Opcode::kHello && !hello_answered_)) return Status::Ok();
  return make_status(COLLX_ERR_PROTOCOL,
                     "%s%s before authenticating: this store requires the job token (COLLX_JOB_TOKEN)",
                     store_wire::opcode_name(opcode), opcode == Opcode::kHello ? " sent twice" : "");
}

Status StoreHandshake::on_request(const store_wire::Request& request, store_wire::Reply* reply, bool* answered) {
  *answered = request.opcode == Opcode::kHello || request.opcode == Opcode::kAuth;
  if (!*answered) {
    if (authenticated_) return Status::Ok();
    return make_status(COLLX_ERR_PROTOCOL,
                       "%s before authenticating: this store requires the job token (COLLX_JOB_TOKEN)",
                       store_wire::opcode_name(request.opcode));
  }
  if (request.opcode == Opcode::kHello) {
    if (!authenticated_ && hello_answered_)
      return make_status(COLLX_ERR_PROTOCOL, "HELLO sent twice before authenticating");
    hello_answered_ = true;
    reply->server_version = store_wire::kProtocolVersion;
    if (token_.empty()) return Status::Ok();
    auth::Nonce nonce;
    COLLX_RETURN_IF_ERROR(auth::make_nonce(&nonce));
    challenge_.assign(nonce.begin(), nonce.end());
    reply->challenge = challenge_;
    return Status::Ok();
  }
  Status status = store_auth_check_client(token_, challenge_, request, &reply->mac);
  challenge_.clear();  // one answer per challenge: no second guess
  if (!status.ok()) return status;
  authenticated_ = true;
  return Status::Ok();
}

}  // namespace collx
