#include "lib/store/store_common.h"

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <limits>
#include <thread>

namespace collx {

Status validate_store_key(const std::string& key) {
  if (key.size() > kStoreMaxKeyBytes)
    return make_status(COLLX_ERR_INVALID_ARG, "store key of %zu bytes exceeds the limit of %zu bytes",
                       key.size(), kStoreMaxKeyBytes);
  return Status::Ok();
}

Status validate_store_value(const Bytes& value, const char* what) {
  if (value.size() > kStoreMaxValueBytes)
    return make_status(COLLX_ERR_INVALID_ARG, "store %s of %zu bytes exceeds the limit of %zu bytes", what,
                       value.size(), kStoreMaxValueBytes);
  return Status::Ok();
}

Status validate_store_keys(const std::vector<std::string>& keys) {
  if (keys.size() > kStoreMaxWaitKeys)
    return make_status(COLLX_ERR_INVALID_ARG, "store wait on %zu keys exceeds the limit of %zu keys",
                       keys.size(), kStoreMaxWaitKeys);
  for (const auto& key : keys) COLLX_RETURN_IF_ERROR(validate_store_key(key));
  return Status::Ok();
}

Status parse_store_counter(const std::string& key, const Bytes* existing, int64_t* out) {
  *out = 0;
  if (existing == nullptr) return Status::Ok();
  auto not_a_counter = [&] {
    return make_status(COLLX_ERR_INVALID_ARG, "store add: key %s holds %zu bytes that are not a decimal integer",
                       quote_store_key(key).c_str(), existing->size());
  };
  size_t i = 0;
  bool negative = false;
  if (!existing->empty() && (*existing)[0] == '-') {
    negative = true;
    i = 1;
  }
  if (i == existing->size()) return not_a_counter();
  // Accumulate as a negative number: its range includes INT64_MIN.
  int64_t value = 0;
  const int64_t min = std::numeric_limits<int64_t>::min();
  for (; i < existing->size(); ++i) {
    uint8_t c = (*existing)[i];
    if (c < '0' || c > '9') return not_a_counter();
    int digit = c - '0';
    if (value < (min + digit) / 10) return not_a_counter();
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == min) return not_a_counter();
    value = -value;
  }
  *out = value;
  return Status::Ok();
}

Bytes format_store_counter(int64_t value) {
  std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

Status add_store_counter(const std::string& key, int64_t existing, int64_t delta, int64_t* out) {
  if (__builtin_add_overflow(existing, delta, out))
    return make_status(COLLX_ERR_INVALID_ARG, "store add: %" PRId64 " + %" PRId64 " overflows key %s", existing,
                       delta, quote_store_key(key).c_str());
  return Status::Ok();
}

bool store_compare_matches(const Bytes* existing, const Bytes& expected) {
  if (existing == nullptr) return expected.empty();
  return *existing == expected;
}

std::string quote_store_key(const std::string& key) {
  constexpr size_t kShown = 200;
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kShown; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (std::isprint(c)) {
      out += static_cast<char>(c);
    } else {
      out += string_printf("\\x%02x", c);
    }
  }
  out += "'";
  if (key.size() > kShown) out += string_printf(" (%zu bytes, shortened)", key.size());
  return out;
}

Status store_timeout_status(const char* operation, int64_t waited_ms, const std::string& missing_key) {
  return make_status(COLLX_ERR_TIMEOUT, "store %s timed out after %" PRId64 " ms; missing key %s", operation,
                     waited_ms, quote_store_key(missing_key).c_str());
}

int64_t store_elapsed_ms(int64_t start_us) { return (monotonic_us() - start_us + 500) / 1000; }

bool StoreBackoff::sleep_until_next(const Deadline& deadline) {
  if (deadline.expired()) return false;
  int sleep_ms = deadline.remaining_ms(next_ms_);
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  next_ms_ = next_ms_ * 2 > max_ms_ ? max_ms_ : next_ms_ * 2;
  return true;
}

}  // namespace collx
