// libFuzzer target for decode_host_identity (lib/core/host_identity.h): every rank publishes
// its identity in the store and every other rank decodes it. Properties: no crash; malformed
// input is COLLX_ERR_PROTOCOL; what decodes re-encodes to exactly the input.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "lib/core/host_identity.h"

using namespace collx;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  HostIdentity identity;
  Status status = decode_host_identity(bytes, &identity);
  if (status.ok()) {
    if (encode_host_identity(identity) != bytes) std::abort();
  } else if (status.code() != COLLX_ERR_PROTOCOL) {
    std::abort();
  }
  return 0;
}
