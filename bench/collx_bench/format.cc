#include "bench/collx_bench/format.h"

#include <cstdarg>
#include <cstdio>

namespace collx_bench {

namespace {

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::string printf_string(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return std::string();
  return std::string(buf, static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1);
}

}  // namespace

std::string float_str(double value, int width) {
  // Count the integer digits as nccl-tests does (0 for values below 1, and for NaN).
  int power = 0;
  for (uint64_t val = 1; value >= static_cast<double>(val) && power < 20; val *= 10) power++;
  if (power < width - 2) return printf_string("%*.2f", width, value);
  if (power < width - 1) return printf_string("%*.1f", width, value);
  if (power < width + 1) return printf_string("%*.0f", width, value);
  if (width >= 7) return printf_string("%*.1e", width, value);
  return printf_string("%*.0e", width, value);
}

std::string table_header() {
  std::string s = "#\n";
  s += printf_string("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
                     "", "", "", "", "");
  s += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size",
                     "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                     "algbw", "busbw", "#wrong", "algorithm");
  s += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
                     "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                     "(GB/s)", "");
  return s;
}

std::string row_preamble(uint64_t bytes, uint64_t count, const std::string& type,
                         const std::string& redop, int root) {
  return printf_string("%12llu  %12llu  %8s  %6s  %6i", static_cast<unsigned long long>(bytes),
                       static_cast<unsigned long long>(count), type.c_str(), redop.c_str(), root);
}

std::string row_body(const Cell& cell) {
  if (!cell.measured) return printf_string("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  const std::string t = float_str(cell.time_us, 7);
  const std::string a = float_str(cell.algbw, 6);
  const std::string b = float_str(cell.busbw, 6);
  if (!cell.checked) return printf_string("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  return printf_string("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(),
                       static_cast<double>(cell.wrong));
}

std::string row_end(const std::string& algorithm) { return "  " + algorithm + "\n"; }

std::string table_footer(int64_t wrong_total, double avg_busbw, const std::string& coll_name) {
  std::string s;
  s += printf_string("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(wrong_total),
                     wrong_total ? "FAILED" : "OK");
  s += printf_string("# %-20s : %g \n", "Avg bus bandwidth", avg_busbw);
  s += "#\n";
  s += "# Collective test concluded: " + coll_name + "\n";
  return s;
}

}  // namespace collx_bench
