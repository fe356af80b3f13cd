// The deadline of store calls that take none of their own (set, add, compare_set, remove on
// the TCP client; the file store's lock): COLLX_TIMEOUT_MS.
#pragma once

#include <cstdint>

namespace collx {

// COLLX_TIMEOUT_MS in milliseconds (-1 = forever); a malformed value is warned about and the
// default (600000) used, since these calls have no caller-facing place to report it.
int64_t store_operation_timeout_ms();

}  // namespace collx
