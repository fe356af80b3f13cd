#include "lib/store/store_auth.h"

#include <algorithm>

namespace collx {
namespace {

// The wire decoder already checked the lengths: a nonce or MAC field is exactly 32 bytes.
template <size_t N>
std::array<uint8_t, N> to_array(const Bytes& bytes) {
  std::array<uint8_t, N> out{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), N), out.begin());
  return out;
}

}  // namespace

Status store_auth_request(const std::string& address, const std::string& token, const Bytes& challenge,
                          bool* needed, store_wire::Request* request, auth::Nonce* client_nonce) {
  *needed = false;
  if (token.empty() && challenge.empty()) return Status::Ok();
  if (token.empty())
    return make_status(COLLX_ERR_PROTOCOL,
                       "the store server at %s requires the job token: set COLLX_JOB_TOKEN to this job's token",
                       address.c_str());
  if (challenge.empty())
    return make_status(COLLX_ERR_PROTOCOL,
                       "the store server at %s does not use a job token but COLLX_JOB_TOKEN is set here: it is not "
                       "this job's store, or it was started without the token",
                       address.c_str());
  if (challenge.size() != auth::kNonceBytes)
    return make_status(COLLX_ERR_PROTOCOL, "the store server at %s sent a challenge of %zu bytes", address.c_str(),
                       challenge.size());
  COLLX_RETURN_IF_ERROR(auth::make_nonce(client_nonce));
  auth::Mac mac;
  COLLX_RETURN_IF_ERROR(
      auth::compute_mac(token, to_array<auth::kNonceBytes>(challenge), *client_nonce, auth::Role::kClient, &mac));
  *request = store_wire::Request();
  request->opcode = store_wire::Opcode::kAuth;
  request->nonce.assign(client_nonce->begin(), client_nonce->end());
  request->mac.assign(mac.begin(), mac.end());
  *needed = true;
  return Status::Ok();
}

Status store_auth_check_server(const std::string& address, const std::string& token, const Bytes& challenge,
                               const auth::Nonce& client_nonce, const Bytes& server_mac) {
  if (server_mac.size() != auth::kMacBytes ||
      !auth::verify_mac(token, to_array<auth::kNonceBytes>(challenge), client_nonce, auth::Role::kServer,
                        to_array<auth::kMacBytes>(server_mac)))
    return make_status(COLLX_ERR_PROTOCOL,
                       "the store server at %s failed to prove it knows the job token (its MAC is wrong): it is not "
                       "this job's store",
                       address.c_str());
  return Status::Ok();
}

Status store_auth_check_client(const std::string& token, const Bytes& challenge, const store_wire::Request& request,
                               Bytes* server_mac) {
  if (token.empty()) return make_status(COLLX_ERR_PROTOCOL, "AUTH sent, but this store server uses no job token");
  if (challenge.size() != auth::kNonceBytes)
    return make_status(COLLX_ERR_PROTOCOL, "AUTH sent without a fresh challenge (HELLO first; one AUTH per HELLO)");
  const auto server_nonce = to_array<auth::kNonceBytes>(challenge);
  const auto client_nonce = to_array<auth::kNonceBytes>(request.nonce);
  if (request.nonce.size() != auth::kNonceBytes ||
      !auth::verify_mac(token, server_nonce, client_nonce, auth::Role::kClient, to_array<auth::kMacBytes>(request.mac)))
    return make_status(COLLX_ERR_PROTOCOL, "authentication failed: wrong job token (COLLX_JOB_TOKEN differs)");
  auth::Mac mac;
  COLLX_RETURN_IF_ERROR(auth::compute_mac(token, server_nonce, client_nonce, auth::Role::kServer, &mac));
  server_mac->assign(mac.begin(), mac.end());
  return Status::Ok();
}

}  // namespace collx
