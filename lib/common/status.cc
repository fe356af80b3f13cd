#include "lib/common/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace collx {

static std::string vformat(const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  char small[256];
  int needed = std::vsnprintf(small, sizeof small, format, copy);
  va_end(copy);
  if (needed < 0) return format;
  if (static_cast<size_t>(needed) < sizeof small) return std::string(small, static_cast<size_t>(needed));
  std::string out(static_cast<size_t>(needed) + 1, '\0');
  std::vsnprintf(&out[0], out.size(), format, args);
  out.resize(static_cast<size_t>(needed));
  return out;
}

std::string string_printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = vformat(format, args);
  va_end(args);
  return out;
}

Status make_status(collx_status_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = vformat(format, args);
  va_end(args);
  return Status(code, std::move(out));
}

Status system_error(const char* what, int errno_value) {
  char buffer[128];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  const char* text = strerror_r(errno_value, buffer, sizeof buffer);
  return make_status(COLLX_ERR_SYSTEM, "%s: %s (errno %d)", what, text, errno_value);
}

const char* status_name(collx_status_t code) {
  switch (code) {
#define COLLX_STATUS_NAME_CASE_(name, value, message) \
  case COLLX_##name:                                  \
    return "COLLX_" #name;
    COLLX_STATUS_MAP(COLLX_STATUS_NAME_CASE_)
#undef COLLX_STATUS_NAME_CASE_
    default:
      return "COLLX_UNKNOWN_STATUS";
  }
}

const char* status_string(collx_status_t code) {
  switch (code) {
#define COLLX_STATUS_STRING_CASE_(name, value, message) \
  case COLLX_##name:                                    \
    return message;
    COLLX_STATUS_MAP(COLLX_STATUS_STRING_CASE_)
#undef COLLX_STATUS_STRING_CASE_
    default:
      return "unknown status code";
  }
}

}  // namespace collx
