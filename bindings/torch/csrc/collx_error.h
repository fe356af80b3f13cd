// The exception the plugin raises for every collx failure. It carries the collx status and
// collx's own message (which names the collective, rank and peer), and Python sees it as
// collx_torch.CollxError, a RuntimeError (module.cc registers the translation).
#pragma once

#include <stdexcept>
#include <string>

#include "collx/collx.h"

namespace collx_torch {

class CollxError : public std::runtime_error {
 public:
  CollxError(collx_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  collx_status_t status() const { return status_; }

 private:
  collx_status_t status_;
};

// "collx <what> failed: COLLX_ERR_X: <collx's message>"; the message is read from `comm`
// (NULL: the calling thread's last error, as for calls without a communicator).
CollxError error_from_status(collx_status_t status, collx_comm_t comm, const std::string& what);

// Throws error_from_status when `status` is an error; returns otherwise.
void check_status(collx_status_t status, collx_comm_t comm, const std::string& what);

// A bad argument found by the plugin itself, before any collx call: COLLX_ERR_INVALID_ARG or,
// for something collx cannot do, COLLX_ERR_UNSUPPORTED, with the same message layout.
[[noreturn]] void throw_invalid(const std::string& what, const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& what, const std::string& message);

}  // namespace collx_torch
