#include "lib/common/thread_error.h"

namespace collx {

std::string& thread_error_message() {
  // One definition in libcollx.so: an inline thread_local in the header would give each
  // layer's object files the same variable too, but one out-of-line owner keeps it obvious.
  thread_local std::string message;
  return message;
}

}  // namespace collx
