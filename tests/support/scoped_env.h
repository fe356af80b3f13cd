// Sets an environment variable for the rest of a scope (for the ranks a test forks in it).
#pragma once

#include <stdlib.h>

#include <string>

namespace collx {
namespace testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace testing
}  // namespace collx
