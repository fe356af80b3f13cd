#include "lib/store/store_timeout.h"

#include "lib/common/log.h"
#include "lib/common/settings.h"

namespace collx {

int64_t store_operation_timeout_ms() {
  constexpr int64_t kDefaultMs = 600000;
  int64_t timeout_ms = kDefaultMs;
  Status status = setting_int(SettingId::TIMEOUT_MS, &timeout_ms);
  if (!status.ok()) {
    COLLX_WARN(STORE, "%s; using %lld ms for store operations", status.message().c_str(),
               static_cast<long long>(kDefaultMs));
    timeout_ms = kDefaultMs;
  }
  return timeout_ms;
}

}  // namespace collx
