#include "lib/common/log.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "lib/common/settings.h"

namespace collx {
namespace detail {
std::atomic<int> g_log_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<uint32_t> g_log_subsys{log_subsys::kAll};
std::atomic<bool> g_log_initialized{false};
}  // namespace detail

namespace {

std::mutex g_log_mutex;
FILE* g_log_file = nullptr;  // nullptr = stderr
char g_host[64] = "?";
thread_local int t_rank = -1;

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

uint32_t subsys_bit(const std::string& name) {
  if (name == "INIT") return log_subsys::kInit;
  if (name == "COLL") return log_subsys::kColl;
  if (name == "P2P") return log_subsys::kP2P;
  if (name == "NET") return log_subsys::kNet;
  if (name == "STORE") return log_subsys::kStore;
  if (name == "TUNE") return log_subsys::kTune;
  if (name == "ALL") return log_subsys::kAll;
  return 0;
}

const char* subsys_name(uint32_t bit) {
  switch (bit) {
    case log_subsys::kInit: return "INIT";
    case log_subsys::kColl: return "COLL";
    case log_subsys::kP2P: return "P2P";
    case log_subsys::kNet: return "NET";
    case log_subsys::kStore: return "STORE";
    case log_subsys::kTune: return "TUNE";
    default: return "ALL";
  }
}

void load_settings_locked() {
  std::string level = upper(setting_raw(SettingId::DEBUG));
  if (level == "NONE") detail::g_log_level = 0;
  else if (level == "INFO") detail::g_log_level = 2;
  else if (level == "TRACE") detail::g_log_level = 3;
  else detail::g_log_level = 1;  // WARN and anything unrecognised

  std::string subsys = upper(setting_raw(SettingId::DEBUG_SUBSYS));
  uint32_t mask = 0;
  bool any_include = false;
  size_t start = 0;
  while (start <= subsys.size()) {
    size_t comma = subsys.find(',', start);
    std::string token = subsys.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!token.empty()) {
      if (token[0] == '^') {
        if (!any_include) { mask = log_subsys::kAll; any_include = true; }
        mask &= ~subsys_bit(token.substr(1));
      } else {
        mask |= subsys_bit(token);
        any_include = true;
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  detail::g_log_subsys = any_include ? mask : log_subsys::kAll;

  gethostname(g_host, sizeof g_host - 1);
  if (g_log_file) {
    fclose(g_log_file);
    g_log_file = nullptr;
  }
  std::string path = setting_raw(SettingId::DEBUG_FILE);
  if (!path.empty()) {
    std::string expanded;
    for (size_t i = 0; i < path.size(); ++i) {
      if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'h') {
        expanded += g_host;
        ++i;
      } else if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
        expanded += std::to_string(getpid());
        ++i;
      } else {
        expanded += path[i];
      }
    }
    g_log_file = fopen(expanded.c_str(), "a");
  }
  detail::g_log_initialized.store(true, std::memory_order_release);
}

}  // namespace

void detail::log_init_once() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (!detail::g_log_initialized.load()) load_settings_locked();
}

void log_reload_settings() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  load_settings_locked();
}

int log_thread_rank() { return t_rank; }
LogRankScope::LogRankScope(int rank) : previous_(t_rank) { t_rank = rank; }
LogRankScope::~LogRankScope() { t_rank = previous_; }

void log_write(LogLevel level, uint32_t subsys, const char* file, int line, const char* format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  const char* level_name = level == LogLevel::kWarn ? "WARN" : level == LogLevel::kInfo ? "INFO" : "TRACE";
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  double seconds = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(g_log_mutex);
  FILE* out = g_log_file ? g_log_file : stderr;
  if (t_rank >= 0) {
    fprintf(out, "%s:%d:r%d %.6f collx %s %s %s:%d %s\n", g_host, static_cast<int>(getpid()), t_rank,
            seconds, level_name, subsys_name(subsys), base, line, message);
  } else {
    fprintf(out, "%s:%d %.6f collx %s %s %s:%d %s\n", g_host, static_cast<int>(getpid()), seconds,
            level_name, subsys_name(subsys), base, line, message);
  }
  fflush(out);
}

}  // namespace collx
