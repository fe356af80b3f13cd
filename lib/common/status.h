// Status: an error code from the public list plus a message naming what went wrong.
// Errors inside collx are values, never exceptions; the C boundary converts.
#pragma once

#include <string>
#include <utility>

#include "collx/collx_status.h"

namespace collx {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(collx_status_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == COLLX_OK; }
  collx_status_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefix context ("allreduce #12: ") to the message, keeping the code.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + message_);
  }

  // Marks a status as deliberately ignored (best-effort cleanup paths).
  void ignore() const {}

 private:
  collx_status_t code_ = COLLX_OK;
  std::string message_;
};

// Formats like printf into a std::string.
std::string string_printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

Status make_status(collx_status_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));
// COLLX_ERR_SYSTEM with "<what>: <strerror(errno_value)>".
Status system_error(const char* what, int errno_value);

const char* status_name(collx_status_t code);
const char* status_string(collx_status_t code);

}  // namespace collx

#define COLLX_RETURN_IF_ERROR(expr)         \
  do {                                      \
    ::collx::Status collx_status_ = (expr); \
    if (!collx_status_.ok()) return collx_status_; \
  } while (0)
