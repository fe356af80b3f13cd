// The text table, byte-for-byte in nccl-tests' layout (src/util.cu), plus one trailing
// "algorithm" column. Every function returns the text (with its newline where it ends a
// line) so tests can compare it exactly; the caller prints it.
#pragma once

#include <cstdint>
#include <string>

namespace collx_bench {

// nccl-tests' getFloatStr: the widest of %.2f / %.1f / %.0f that fits `width`, else
// exponent notation.
std::string float_str(double value, int width);

// One placement's measurement as printed in the table.
struct Cell {
  bool measured = false;  // false: the placement does not exist for this collective (N/A)
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  bool checked = false;   // false: -c 0, the #wrong column shows N/A
  int64_t wrong = 0;
};

// The three header rows ("out-of-place / in-place", names, units), preceded by "#".
std::string table_header();
// "%12li  %12li  %8s  %6s  %6i": size, count, type, redop, root.
std::string row_preamble(uint64_t bytes, uint64_t count, const std::string& type,
                         const std::string& redop, int root);
// "  %7s  %6s  %6s  %6g": time, algbw, busbw, #wrong (or N/A).
std::string row_body(const Cell& cell);
// The algorithm column and the end of the line.
std::string row_end(const std::string& algorithm);

// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X ", "#",
// "# Collective test concluded: NAME".
std::string table_footer(int64_t wrong_total, double avg_busbw, const std::string& coll_name);

}  // namespace collx_bench
