// A minimal JSON writer (no dependency) and the --json document of collx-bench:
//   {"tool", "version", "library_version", "collective", "config": {...},
//    "ranks": [{rank, pid, host, local_rank}],
//    "results": [{size, count, type, redop, root, algorithm,
//                 out_of_place: {time_us, algbw, busbw, wrong}, in_place: {...} | null}],
//    "wrong_total", "avg_busbw", "errors": [...]}
// bench/mpi/mpi_coll_bench.c writes the same shape, so compare_mpi.sh can join the two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/format.h"

namespace collx_bench {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(const std::string& k);  // inside an object, before its value
  void string(const std::string& v);
  void number(double v);  // NaN and infinities become null
  void integer(int64_t v);
  void boolean(bool v);
  void null();
  const std::string& text() const { return out_; }

 private:
  void before_value();
  std::string out_;
  std::vector<bool> has_items_;  // per open container
  bool after_key_ = false;
};

std::string json_escape(const std::string& s);

struct RankInfo {
  int rank = 0;
  int pid = 0;
  int local_rank = 0;
  std::string host;
};

struct RowResult {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  std::string algorithm;
  Cell out_of_place;
  Cell in_place;
};

struct Report {
  std::string tool = "collx-bench";
  std::string version;
  std::string library_version;
  std::string collective;
  int nranks = 0;
  std::vector<RankInfo> ranks;
  std::vector<RowResult> rows;
  int64_t wrong_total = 0;
  double avg_busbw = 0;
  std::vector<std::string> errors;
};

// The whole document; options supply the "config" object.
std::string report_json(const Report& report, const Options& options);

// Mean busbw over every measured cell (out-of-place and in-place), as nccl-tests' footer.
double average_busbw(const std::vector<RowResult>& rows);

}  // namespace collx_bench
