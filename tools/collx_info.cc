// collx-info: what this build of collx is and how it is configured.
//   collx-info                      version, build features, settings with current values
//   collx-info --settings-markdown  the environment reference (docs/environment.md)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collx/collx.h"
#include "lib/common/settings.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--settings-markdown") == 0) {
    std::fputs(collx::settings_markdown().c_str(), stdout);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: collx-info [--settings-markdown]\n");
    return 2;
  }
  std::printf("collx %s\n", COLLX_VERSION_STRING);
  std::printf("transports built: tcp\n\nsettings (value from the environment, else the default):\n");
  size_t count = 0;
  const collx::SettingInfo* all = collx::all_settings(&count);
  for (size_t i = 0; i < count; ++i) {
    const char* env = std::getenv(all[i].name);
    std::printf("  %-24s = %-12s %s\n", all[i].name,
                env ? env : (*all[i].default_value ? all[i].default_value : "(unset)"),
                env ? "(environment)" : "(default)");
  }
  return 0;
}
