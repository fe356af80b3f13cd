#include "tools/collx_run/job_token.h"

#include <cstdio>
#include <cstdlib>

#include "lib/common/auth.h"

namespace collx_run {

bool ensure_job_token(const RunOptions& options, std::string* error) {
  if (std::getenv("COLLX_JOB_TOKEN") != nullptr) return true;  // the user's choice, even ""
  if (options.max_nodes != 1 || !collx::auth::available()) return true;
  collx::auth::Nonce random;  // RAND_bytes (lib/common/auth.cc)
  collx::Status st = collx::auth::make_nonce(&random);
  if (!st.ok()) {
    *error = "cannot generate a job token: " + st.message();
    return false;
  }
  std::string token;
  for (size_t i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", random[i]);
    token += hex;
  }
  if (setenv("COLLX_JOB_TOKEN", token.c_str(), 1) != 0) {
    *error = "cannot set COLLX_JOB_TOKEN";
    return false;
  }
  return true;
}

}  // namespace collx_run
