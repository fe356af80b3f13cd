// Scratch folders for tests that make ranks write files (flight records, traces).
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

namespace collx {
namespace testing {

inline bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// A new empty folder under /tmp ("" when it cannot be made).
inline std::string temp_dir() {
  char tmpl[] = "/tmp/collx-fr-test-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir ? dir : "";
}

// Removes a folder temp_dir() made (and nothing else).
inline void remove_dir(const std::string& dir) {
  if (dir.rfind("/tmp/collx-fr-test-", 0) != 0) return;
  const std::string command = "rm -rf '" + dir + "'";
  if (std::system(command.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

}  // namespace testing
}  // namespace collx
