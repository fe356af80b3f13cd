// The TCP store's side of the job token handshake (lib/common/auth.h carried in store frames,
// see store_wire.h): what the client sends after the HELLO reply, and what each side checks.
#pragma once

#include <string>

#include "lib/common/auth.h"
#include "lib/common/status.h"
#include "lib/store/store_wire.h"

namespace collx {

// Client: given the HELLO reply's challenge, checks that the server's demand matches ours
// (a token on both sides or on neither) and, when both have one, fills *request with the AUTH
// request and *client_nonce with the nonce it carries. *needed is false when neither side
// uses a token. Errors name the address and say which side lacks the token.
Status store_auth_request(const std::string& address, const std::string& token, const Bytes& challenge,
                          bool* needed, store_wire::Request* request, auth::Nonce* client_nonce);

// Client: checks the server's MAC from the AUTH reply.
Status store_auth_check_server(const std::string& address, const std::string& token, const Bytes& challenge,
                               const auth::Nonce& client_nonce, const Bytes& server_mac);

// Server: checks an AUTH request against the challenge this connection was sent; on success
// *server_mac is the server's answer. COLLX_ERR_PROTOCOL with the reason otherwise.
Status store_auth_check_client(const std::string& token, const Bytes& challenge, const store_wire::Request& request,
                               Bytes* server_mac);

}  // namespace collx
