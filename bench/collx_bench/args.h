// collx-bench's command line: nccl-tests' flags (-b -e -i -f -n -w -c -d -o -r -T) plus
// collx's (-t transport, -a algorithm, --np, --json, --plot). Parsing never calls the library, so a
// bad command line is reported (exit 2) before any rank starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/collx_bench/names.h"

namespace collx_bench {

struct Options {
  BenchColl coll = BenchColl::kAllreduce;
  // nccl-tests defaults: one size of 32 MiB, +1 MiB steps, factor off.
  uint64_t min_bytes = 32ull << 20;
  uint64_t max_bytes = 32ull << 20;
  uint64_t step_bytes = 1ull << 20;
  uint64_t step_factor = 1;
  int iters = 20;
  int warmup_iters = 5;
  int check_iters = 1;  // 0 = no check, #wrong shows N/A
  std::vector<collx_datatype_t> datatypes{COLLX_FLOAT32};  // -d all: every datatype
  std::vector<collx_op_t> ops{COLLX_SUM};                  // -o all: every op
  int root = 0;
  bool all_roots = false;  // -r all
  std::string transport = "auto";  // the library's choice: shm on one host, else tcp
  unsigned transport_mask = 0;
  // --explain: print the library's algorithm choice and the candidates' predicted times for
  // every size of the sweep instead of running it. --tune FILE: measure the cost-model
  // constants of the transport and write them to FILE (COLLX_TUNE_FILE reads it).
  bool explain = false;
  std::string tune_path;
  std::string algorithm = "auto";  // resolved by collx_algorithm_from_name at startup
  int np = 4;                      // local ranks to start when no launcher is present
  std::string json_path;
  double timeout_s = 0;  // 0 = the library's default deadline
  // --plot FILE.svg: busbw against size; --plot-add FILE.json (repeatable): earlier --json
  // outputs drawn too; --plot-only: draw the --plot-add files without running.
  std::string plot_path;
  std::vector<std::string> plot_add;
  bool plot_only = false;
  bool zero_copy = false;  // --zero-copy: send/recv buffers from collx_mem_alloc
};

enum class ParseResult { kOk, kHelp, kError };

// Parses argv[1..]: the collective (first non-flag word) and flags in the forms "-b 8",
// "-b8", "--minbytes 8" and "--minbytes=8". On kError, *error says which argument was
// wrong and why.
ParseResult parse_args(int argc, const char* const* argv, Options* options, std::string* error);

// "8", "64K", "1M", "2G" (powers of 1024; "KB", "KiB" accepted; case-insensitive).
bool parse_size(const std::string& text, uint64_t* bytes);

std::string usage_text(const char* program);

}  // namespace collx_bench
