// main() for a fuzz target built without libFuzzer (g++, CI): runs LLVMFuzzerTestOneInput once
// on every file named, or found directly inside a folder named, so the checked-in corpus is
// replayed by ctest. A crash or abort fails the test; an unreadable path fails it too.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool run_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy of exactly the input's size, so a read past it is an out-of-bounds read under ASan.
  std::vector<uint8_t> exact(bytes);
  LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
  return true;
}

bool run_path(const std::string& path, int* count) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "cannot stat %s\n", path.c_str());
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    ++*count;
    return run_file(path);
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return false;
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(dir))
    if (entry->d_name[0] != '.') names.push_back(entry->d_name);
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  bool ok = true;
  for (const std::string& name : names) ok = run_path(path + "/" + name, count) && ok;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  int count = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) ok = run_path(argv[i], &count) && ok;
  LLVMFuzzerTestOneInput(nullptr, 0);  // the empty input, always
  std::printf("replayed %d inputs\n", count);
  return ok && count > 0 ? 0 : 1;
}
