// Error reporting for the handle-less calls of the parallel layer (tp/sp ops, pp, flags
// and norms): a thread-local message read by collx_parallel_last_error.
#pragma once

#include <string>

#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {

std::string& thread_free_error();

inline collx_status_t free_fail(collx_status_t st, const std::string& msg) {
  thread_free_error() = msg;
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

// Per-thread message of the last failed creation of each handle kind (no handle exists to
// hold it): collx_dp_last_error(NULL), collx_zero_last_error(NULL), ...
enum class Handle { kDp, kZero, kScaler };
std::string& thread_create_error(Handle kind);
inline collx_status_t create_fail(Handle kind, const char* fn, collx_status_t st, const std::string& msg) {
  thread_create_error(kind) = std::string(fn) + ": " + msg;
  return st;
}

// Why `layout` cannot shape the float32 buffers of a dp group of comm_size ranks ("" when
// it can): not finalized, planned for another dp size, or a tensor that is not float32.
std::string float_layout_problem(collx_layout_t layout, int32_t comm_size);

template <typename Fn>
collx_status_t free_call(const char* fn, Fn&& body) {
  return guarded(body, [&](const std::string& m) { thread_free_error() = std::string(fn) + ": " + m; });
}

}  // namespace parallel
}  // namespace collx
