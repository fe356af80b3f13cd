#include "bindings/torch/csrc/collx_error.h"

namespace collx_torch {

namespace {

std::string layout(const std::string& what, collx_status_t status, const std::string& detail) {
  std::string text = "collx " + what + " failed: " + collx_status_name(status);
  text += ": ";
  text += detail.empty() ? collx_status_string(status) : detail;
  return text;
}

}  // namespace

CollxError error_from_status(collx_status_t status, collx_comm_t comm, const std::string& what) {
  std::string detail = collx_last_error(comm);
  // collx's message starts with the status name already ("COLLX_ERR_X: ..."); keep one.
  const std::string prefix = std::string(collx_status_name(status)) + ": ";
  if (detail.compare(0, prefix.size(), prefix) == 0) detail.erase(0, prefix.size());
  return CollxError(status, layout(what, status, detail));
}

void check_status(collx_status_t status, collx_comm_t comm, const std::string& what) {
  if (status < 0) throw error_from_status(status, comm, what);
}

void throw_invalid(const std::string& what, const std::string& message) {
  throw CollxError(COLLX_ERR_INVALID_ARG, layout(what, COLLX_ERR_INVALID_ARG, message));
}

void throw_unsupported(const std::string& what, const std::string& message) {
  throw CollxError(COLLX_ERR_UNSUPPORTED, layout(what, COLLX_ERR_UNSUPPORTED, message));
}

}  // namespace collx_torch
