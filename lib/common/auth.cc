// HMAC-SHA256 challenge-response over OpenSSL libcrypto (see auth.h). No hashing is written
// here: RAND_bytes, HMAC and CRYPTO_memcmp do the work.
#include "lib/common/auth.h"

#include "lib/common/settings.h"

#if defined(COLLX_HAVE_OPENSSL)
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#endif

namespace collx {
namespace auth {

namespace {

const char* role_name(Role role) { return role == Role::kClient ? "client" : "server"; }

Status unsupported() {
  return make_status(COLLX_ERR_UNSUPPORTED,
                     "COLLX_JOB_TOKEN is set but this collx was built without OpenSSL (libcrypto), so it cannot "
                     "authenticate connections; rebuild with libssl-dev installed or unset COLLX_JOB_TOKEN");
}

}  // namespace

#if defined(COLLX_HAVE_OPENSSL)

bool available() { return true; }

Status make_nonce(Nonce* out) {
  if (RAND_bytes(out->data(), static_cast<int>(out->size())) != 1)
    return make_status(COLLX_ERR_SYSTEM, "job token: OpenSSL RAND_bytes could not produce a nonce");
  return Status::Ok();
}

Status compute_mac(const std::string& token, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                   Mac* out) {
  if (token.empty()) return make_status(COLLX_ERR_INVALID_ARG, "job token: the token is empty");
  const std::string role_text = role_name(role);
  uint8_t message[2 * kNonceBytes + 8];
  size_t length = 0;
  for (uint8_t b : server_nonce) message[length++] = b;
  for (uint8_t b : client_nonce) message[length++] = b;
  for (char c : role_text) message[length++] = static_cast<uint8_t>(c);
  unsigned int mac_length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), message, length, out->data(), &mac_length) ==
          nullptr ||
      mac_length != kMacBytes)
    return make_status(COLLX_ERR_SYSTEM, "job token: OpenSSL HMAC-SHA256 failed");
  return Status::Ok();
}

bool verify_mac(const std::string& token, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                const Mac& received) {
  Mac expected;
  if (!compute_mac(token, server_nonce, client_nonce, role, &expected).ok()) return false;
  return CRYPTO_memcmp(expected.data(), received.data(), kMacBytes) == 0;
}

#else  // no OpenSSL: nothing can be authenticated

bool available() { return false; }
Status make_nonce(Nonce*) { return unsupported(); }
Status compute_mac(const std::string&, const Nonce&, const Nonce&, Role, Mac*) { return unsupported(); }
bool verify_mac(const std::string&, const Nonce&, const Nonce&, Role, const Mac&) { return false; }

#endif

Status check_token_usable(const std::string& token) {
  if (!token.empty() && !available()) return unsupported();
  return Status::Ok();
}

Status job_token_from_settings(std::string* token) {
  *token = setting_raw(SettingId::JOB_TOKEN);
  if (!token->empty() && token->size() < kMinTokenBytes) {
    const size_t length = token->size();
    token->clear();  // a refused token is not handed on
    return make_status(COLLX_ERR_INVALID_ARG,
                       "COLLX_JOB_TOKEN is %zu bytes long; a job token needs at least %zu (use a random one, "
                       "e.g. the 32 hex digits of `openssl rand -hex 16`)",
                       length, kMinTokenBytes);
  }
  return check_token_usable(*token);
}

}  // namespace auth
}  // namespace collx
