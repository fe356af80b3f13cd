// Exceptions turned into statuses where they must stop: the C boundary and threads of our
// own (an exception leaving a thread's function ends the process). Errors inside collx are
// values; exceptions come from the standard library (std::bad_alloc, std::system_error when
// a thread cannot be started).
#pragma once

#include "lib/common/status.h"

namespace collx {

// Only inside a catch block: the exception being handled as a status whose message starts
// with `where` ("allreduce #3 on the progress thread"). COLLX_ERR_NO_MEMORY for
// std::bad_alloc, COLLX_ERR_SYSTEM for std::system_error, COLLX_ERR_INTERNAL for anything
// else. Never throws: when the memory for the message cannot be had either, the message is
// only "out of memory" (short enough to need no allocation).
Status current_exception_status(const char* where) noexcept;

}  // namespace collx
