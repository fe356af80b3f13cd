// The job token handshake: a challenge-response with HMAC-SHA256 (OpenSSL libcrypto) by which
// the two ends of a store or transport connection each prove they know the job token
// (COLLX_JOB_TOKEN) without sending it. docs/security.md states what it protects.
//
// The server (accepting side) sends a fresh random nonce; the client answers with its own
// nonce and mac(client) = HMAC(token, server nonce || client nonce || "client"); the server
// checks it and answers mac(server) = HMAC(token, server nonce || client nonce || "server"),
// which the client checks. The role string keeps one side's answer from being replayed as the
// other's; the fresh nonces keep an old exchange from being replayed. MACs are compared in
// constant time (CRYPTO_memcmp). The framing of these fields belongs to each protocol (the
// store's frames, the TCP transport's handshake); this module only computes and checks.
//
// Without OpenSSL every function that needs it answers COLLX_ERR_UNSUPPORTED: a token that is
// set is never silently ignored.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"

namespace collx {
namespace auth {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;  // SHA-256
// The shortest job token accepted from COLLX_JOB_TOKEN: 16 bytes. A token is the only secret
// of the handshake and anyone who can reach a port may try it offline against one captured
// exchange, so a short word is refused rather than trusted (32 hex digits from
// `openssl rand -hex 16` carry 128 bits).
constexpr size_t kMinTokenBytes = 16;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

enum class Role { kClient, kServer };

// True when collx was built with OpenSSL (a job token can be used).
bool available();

// The job token from COLLX_JOB_TOKEN: "" when unset or empty (no authentication). A set token
// shorter than kMinTokenBytes is COLLX_ERR_INVALID_ARG (the message names the variable and the
// length, never the token); a set token in a build without OpenSSL is COLLX_ERR_UNSUPPORTED.
// Tokens passed explicitly to the internal store and transport constructors are not
// length-checked: every user-facing path reads the token through this function.
Status job_token_from_settings(std::string* token);

// COLLX_ERR_UNSUPPORTED when `token` is not empty and this build has no OpenSSL.
Status check_token_usable(const std::string& token);

// A nonce from OpenSSL's CSPRNG.
Status make_nonce(Nonce* out);

// HMAC-SHA256(token, server_nonce || client_nonce || role name). `token` must not be empty.
Status compute_mac(const std::string& token, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                   Mac* out);

// Whether `received` is the MAC `role` must send for these nonces (constant-time compare).
// False as well when the MAC cannot be computed.
bool verify_mac(const std::string& token, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                const Mac& received);

}  // namespace auth
}  // namespace collx
