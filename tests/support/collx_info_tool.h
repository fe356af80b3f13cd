// Running build/tools/collx-info from a test (e.g. `collx-info hang DIR` over flight records).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/support/temp_dir.h"

namespace collx {
namespace testing {

// build/tests/... -> build/tools/collx-info: the nearest folder above this test binary with
// tools/collx-info; "collx-info" (from PATH) when there is none.
inline std::string collx_info_path() {
  char self[4096] = {0};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir(self, n > 0 ? static_cast<size_t>(n) : 0);
  while (dir.rfind('/') != std::string::npos && dir.rfind('/') > 0) {
    dir = dir.substr(0, dir.rfind('/'));
    if (exists(dir + "/tools/collx-info")) return dir + "/tools/collx-info";
  }
  return "collx-info";
}

// Runs a shell command; its standard output, and its exit code in *exit_code (-1 when it
// did not exit normally).
inline std::string run_and_read(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  const int status = pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace testing
}  // namespace collx
