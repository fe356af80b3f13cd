// Small helpers shared by tests.
#pragma once

#include <string>

namespace collx {
namespace testing {

// A fresh directory under $TMPDIR (or /tmp) removed by the caller.
std::string make_temp_dir(const char* prefix);

}  // namespace testing
}  // namespace collx
