// Rules every store implementation shares, so the three behave identically: argument
// limits, the decimal counter format of add(), compare_set's decision, and the wording of
// timeout errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {

// COLLX_ERR_INVALID_ARG when a key, value or key list exceeds the store limits.
Status validate_store_key(const std::string& key);
Status validate_store_value(const Bytes& value, const char* what = "value");
Status validate_store_keys(const std::vector<std::string>& keys);

// add() keeps counters as decimal text so that get() returns "5". A missing key counts as 0;
// anything but an optional '-' and digits fitting int64 is COLLX_ERR_INVALID_ARG naming the key.
Status parse_store_counter(const std::string& key, const Bytes* existing, int64_t* out);
Bytes format_store_counter(int64_t value);
// existing + delta, or COLLX_ERR_INVALID_ARG when that overflows int64.
Status add_store_counter(const std::string& key, int64_t existing, int64_t delta, int64_t* out);

// compare_set's decision: store `desired` when the key holds `expected`, or when the key is
// missing and `expected` is empty.
bool store_compare_matches(const Bytes* existing, const Bytes& expected);

// A key quoted for messages and logs: non-printable bytes escaped, long keys shortened.
std::string quote_store_key(const std::string& key);

// "store <operation> timed out after <ms> ms; missing key '<key>'".
Status store_timeout_status(const char* operation, int64_t waited_ms, const std::string& missing_key);

// Milliseconds elapsed since `start_us` (a monotonic_us() value), for timeout messages.
int64_t store_elapsed_ms(int64_t start_us);

// Sleeps between polls of a shared resource: 1 ms, doubling up to a cap, never past the
// deadline. Returns false (without sleeping) once the deadline has passed.
class StoreBackoff {
 public:
  explicit StoreBackoff(int first_ms = 1, int max_ms = 50) : next_ms_(first_ms), max_ms_(max_ms) {}
  bool sleep_until_next(const Deadline& deadline);
  int next_ms() const { return next_ms_; }

 private:
  int next_ms_;
  int max_ms_;
};

}  // namespace collx
