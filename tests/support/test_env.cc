#include "tests/support/test_env.h"

#include <cstdlib>
#include <string>

namespace collx {
namespace testing {

std::string make_temp_dir(const char* prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  char* made = mkdtemp(&templ[0]);
  return made ? std::string(made) : std::string();
}

}  // namespace testing
}  // namespace collx
