// The calling thread's last error message, shared by every layer that has C entry points
// (lib/api and parallel/), so that collx_last_error(NULL) returns the message of the
// thread's last failed call whichever layer it failed in (docs/api-conventions.md).
#pragma once

#include <string>

namespace collx {

// The message itself: assign to record a failure, read for collx_last_error(NULL). Each
// thread has its own; the pointer from c_str() stays valid until the thread's next failure.
std::string& thread_error_message();

}  // namespace collx
