// Logging by level and subsystem. The level is checked before anything is formatted, so a
// disabled log line costs one load and a compare. Each line is prefixed with host, pid and
// the rank of the communicator the calling thread works for.
#pragma once

#include <atomic>
#include <cstdint>

namespace collx {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

namespace log_subsys {
constexpr uint32_t kInit = 1u << 0;
constexpr uint32_t kColl = 1u << 1;
constexpr uint32_t kP2P = 1u << 2;
constexpr uint32_t kNet = 1u << 3;
constexpr uint32_t kStore = 1u << 4;
constexpr uint32_t kTune = 1u << 5;
constexpr uint32_t kAll = 0xffffffffu;
// Spelled as in COLLX_DEBUG_SUBSYS, for the COLLX_WARN(NET, ...) macros below.
constexpr uint32_t INIT = kInit;
constexpr uint32_t COLL = kColl;
constexpr uint32_t P2P = kP2P;
constexpr uint32_t NET = kNet;
constexpr uint32_t STORE = kStore;
constexpr uint32_t TUNE = kTune;
}  // namespace log_subsys

namespace detail {
extern std::atomic<int> g_log_level;        // read without locks on every log site
extern std::atomic<uint32_t> g_log_subsys;  // mask of enabled subsystems
extern std::atomic<bool> g_log_initialized;
void log_init_once();
}  // namespace detail

inline bool log_enabled(LogLevel level, uint32_t subsys) {
  if (!detail::g_log_initialized.load(std::memory_order_acquire)) detail::log_init_once();
  return static_cast<int>(level) <= detail::g_log_level.load(std::memory_order_relaxed) &&
         (detail::g_log_subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void log_write(LogLevel level, uint32_t subsys, const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 5, 6)));

// Re-read COLLX_DEBUG / COLLX_DEBUG_SUBSYS / COLLX_DEBUG_FILE (tests, collx-info).
void log_reload_settings();

// The rank printed in log lines of this thread (-1: none). Set for the duration of an API
// call on a communicator by LogRankScope.
int log_thread_rank();
class LogRankScope {
 public:
  explicit LogRankScope(int rank);
  ~LogRankScope();
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int previous_;
};

}  // namespace collx

#define COLLX_LOG(level, subsys, ...)                                            \
  do {                                                                           \
    if (::collx::log_enabled(level, subsys))                                     \
      ::collx::log_write(level, subsys, __FILE__, __LINE__, __VA_ARGS__);        \
  } while (0)
#define COLLX_WARN(subsys, ...) COLLX_LOG(::collx::LogLevel::kWarn, ::collx::log_subsys::subsys, __VA_ARGS__)
#define COLLX_INFO(subsys, ...) COLLX_LOG(::collx::LogLevel::kInfo, ::collx::log_subsys::subsys, __VA_ARGS__)
#define COLLX_TRACE(subsys, ...) COLLX_LOG(::collx::LogLevel::kTrace, ::collx::log_subsys::subsys, __VA_ARGS__)
