#include "lib/common/exception_status.h"

#include <exception>
#include <new>
#include <system_error>

namespace collx {

namespace {

Status describe_current(const char* where) {
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    return make_status(COLLX_ERR_NO_MEMORY, "%s: out of memory (%s)", where, e.what());
  } catch (const std::system_error& e) {
    return make_status(COLLX_ERR_SYSTEM, "%s: %s", where, e.what());
  } catch (const std::exception& e) {
    return make_status(COLLX_ERR_INTERNAL, "%s: unexpected exception: %s", where, e.what());
  } catch (...) {
    return make_status(COLLX_ERR_INTERNAL, "%s: unexpected exception of an unknown type", where);
  }
}

}  // namespace

Status current_exception_status(const char* where) noexcept {
  try {
    return describe_current(where);
  } catch (...) {
    // The message needed memory that is not there. "out of memory" fits the string's inline
    // buffer, so this status allocates nothing.
    return Status(COLLX_ERR_NO_MEMORY, "out of memory");
  }
}

}  // namespace collx
