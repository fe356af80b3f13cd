// Error reporting for the handle-less calls of the parallel layer (tp/sp ops, pp, flags
// and norms): the calling thread's message, read by collx_last_error(NULL).
#pragma once

#include <string>

#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

inline collx_status_t free_fail(collx_status_t st, const std::string& msg) {
  thread_error() = msg;
  return st;
}

// The communicator's message for a failed collx call made by `fn`.
collx_status_t comm_fail(collx_comm_t comm, collx_status_t st, const char* fn);

// Size and rank of a group, checked (the comm may be NULL or broken).
struct GroupShape {
  size_t size = 1;
  size_t rank = 0;
};
collx_status_t group_shape(collx_comm_t comm, const char* fn, GroupShape* out);

// A failed creation (no handle exists to hold the message): the thread's message only.
inline collx_status_t create_fail(const char* fn, collx_status_t st, const std::string& msg) {
  thread_error() = std::string(fn) + ": " + msg;
  return st;
}

// Why `layout` cannot shape the float32 buffers of a dp group of comm_size ranks ("" when
// it can): not finalized, planned for another dp size, or a tensor that is not float32.
std::string float_layout_problem(collx_layout_t layout, int32_t comm_size);

template <typename Fn>
collx_status_t free_call(const char* fn, Fn&& body) {
  return guarded(body, [&](const std::string& m) { thread_error() = std::string(fn) + ": " + m; });
}

}  // namespace parallel
}  // namespace collx
