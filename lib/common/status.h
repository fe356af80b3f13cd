// Status: an error code from the public list plus a message naming what went wrong.
// Errors inside collx are values, never exceptions; the C boundary converts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "collx/collx_status.h"

namespace collx {

// A status code that came from a peer (a failure notice on the wire or in shared memory):
// the code itself when it is one of the public error codes, else COLLX_ERR_REMOTE. Never
// cast such a value to collx_status_t unchecked: an enum holding a value outside its list is
// undefined behaviour.
inline collx_status_t status_code_from_peer(int64_t value) {
  if (value < 0 && value > COLLX_STATUS_LAST_) return static_cast<collx_status_t>(value);
  return COLLX_ERR_REMOTE;
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(collx_status_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == COLLX_OK; }
  collx_status_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefix context ("allreduce #12: ") to the message, keeping the code (and remote code).
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    Status out(code_, context + message_);
    out.remote_code_ = remote_code_;
    return out;
  }

  // COLLX_ERR_REMOTE statuses built from a peer's failure notice (a POISON frame or message,
  // or the shm segment's reason) carry the status code the peer failed with; COLLX_OK when
  // unknown (a peer that died or closed its connection says nothing). Decisions about the
  // cause (e.g. the flight recorder's dump on a remote timeout) read this, never the text.
  collx_status_t remote_code() const { return remote_code_; }
  Status with_remote_code(collx_status_t code) const {
    Status out = *this;
    out.remote_code_ = code;
    return out;
  }
  // The code of the failure that started it all: remote_code() when this is a peer's
  // failure with a known code, else code(). What a rank passes on when it tells its own
  // peers, so a relayed failure keeps its root cause.
  collx_status_t cause_code() const {
    return code_ == COLLX_ERR_REMOTE && remote_code_ != COLLX_OK ? remote_code_ : code_;
  }

  // Marks a status as deliberately ignored (best-effort cleanup paths).
  void ignore() const {}

 private:
  collx_status_t code_ = COLLX_OK;
  std::string message_;
  collx_status_t remote_code_ = COLLX_OK;
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
