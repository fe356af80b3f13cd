// collx-bench: nccl-tests-style bandwidth benchmark of collx collectives, no MPI needed.
// Usage: collx-bench <collective> [flags] (collx-bench -h, or usage_text in args.cc).
// Without a launcher it starts --np local ranks (launcher.cc); under one it is a rank.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/bench_dp.h"
#include "bench/collx_bench/bench_group.h"
#include "bench/collx_bench/bench_quant.h"
#include "bench/collx_bench/bench_rank.h"
#include "bench/collx_bench/bench_soak.h"
#include "bench/collx_bench/bench_zero.h"
#include "bench/collx_bench/launch_env.h"
#include "bench/collx_bench/launcher.h"
#include "bench/collx_bench/plot.h"
#include "bench/collx_bench/sweep.h"
#include "collx/collx.h"

namespace {

using namespace collx_bench;

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buf;
  buf << in.rdbuf();
  *text = buf.str();
  return static_cast<bool>(in) || in.eof();
}

// --plot: this run's JSON (when given) first, then every --plot-add file. Returns an exit
// status: kExitUsage for an unreadable or malformed --plot-add file, kExitFailure when the
// SVG cannot be written.
int write_plot(const Options& o, const std::string& run_json) {
  PlotSpec spec;
  std::string error;
  std::vector<std::pair<std::string, std::string>> inputs;  // (path, fallback label)
  if (!run_json.empty()) inputs.emplace_back(run_json, "collx");
  for (const std::string& path : o.plot_add) inputs.emplace_back(path, label_from_path(path));
  for (const auto& in : inputs) {
    std::string text, hint;
    if (!read_file(in.first, &text)) {
      std::fprintf(stderr, "collx-bench: --plot: cannot read %s\n", in.first.c_str());
      return in.first == run_json ? kExitFailure : kExitUsage;
    }
    if (!series_from_json(text, in.second, &spec.series, &hint, &error)) {
      std::fprintf(stderr, "collx-bench: --plot: %s: %s\n", in.first.c_str(), error.c_str());
      return in.first == run_json ? kExitFailure : kExitUsage;
    }
    if (spec.title.empty()) spec.title = hint;
  }
  spec.title = "busbw: " + spec.title;
  const std::string svg = plot_svg(spec);
  FILE* f = std::fopen(o.plot_path.c_str(), "w");
  if (!f || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "collx-bench: --plot: cannot write %s\n", o.plot_path.c_str());
    return kExitFailure;
  }
  std::printf("# Plot of %zu series written to %s\n", spec.series.size(), o.plot_path.c_str());
  return kExitOk;
}

// Checks the --plot-add files before any rank starts, so a typo costs no benchmark run.
int check_plot_inputs(const Options& o) {
  for (const std::string& path : o.plot_add) {
    std::string text, error;
    std::vector<PlotSeries> series;
    if (!read_file(path, &text)) {
      std::fprintf(stderr, "collx-bench: --plot-add: cannot read %s\n", path.c_str());
      return kExitUsage;
    }
    if (!series_from_json(text, path, &series, nullptr, &error)) {
      std::fprintf(stderr, "collx-bench: --plot-add: %s: %s\n", path.c_str(), error.c_str());
      return kExitUsage;
    }
  }
  return kExitOk;
}

// A fresh temporary file for this run's JSON when --plot is given without --json.
std::string temp_json_path() {
  const char* dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/collx-bench-plot-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) return "";
  close(fd);
  return buf.data();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace collx_bench;
  if (argc >= 2 && std::string(argv[1]) == "dp") return bench_dp_main(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "zero") {
    // `collx-bench zero --quant`: ZeRO++'s quantized weight all-gather and gradient
    // reduce-scatter against fp32 and bf16 (the same as `collx-bench quant`).
    std::vector<char*> rest;
    for (int i = 0; i < argc; ++i) {
      if (std::string(argv[i]) != "--quant") rest.push_back(argv[i]);
    }
    if (static_cast<int>(rest.size()) != argc) {
      static char quant_name[] = "quant";
      rest[1] = quant_name;
      rest.push_back(nullptr);
      return bench_quant_main(static_cast<int>(rest.size()) - 1, rest.data());
    }
    return bench_zero_main(argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "group") return bench_group_main(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "quant") return bench_quant_main(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "soak") return bench_soak_main(argc, argv);
  Options options;
  std::string error;
  switch (parse_args(argc, argv, &options, &error)) {
    case ParseResult::kHelp:
      std::printf("%s", usage_text(argv[0]).c_str());
      return kExitOk;
    case ParseResult::kError:
      std::fprintf(stderr, "collx-bench: %s\n%s", error.c_str(), usage_text(argv[0]).c_str());
      return kExitUsage;
    case ParseResult::kOk:
      break;
  }
  if (options.plot_only) return write_plot(options, "");
  if (!options.plot_path.empty()) {
    if (const int code = check_plot_inputs(options); code != kExitOk) return code;
  }
  // Everything that can be refused without ranks is refused here, once, with exit 2.
  if (size_sweep(options.min_bytes, options.max_bytes, options.step_bytes, options.step_factor, &error).empty()) {
    std::fprintf(stderr, "collx-bench: %s\n", error.c_str());
    return kExitUsage;
  }
  collx_algorithm_t algorithm = COLLX_ALGO_AUTO;
  if (collx_algorithm_from_name(options.algorithm.c_str(), &algorithm) != COLLX_OK) {
    const char* why = collx_last_error(nullptr);
    std::fprintf(stderr, "collx-bench: -a %s: %s\n", options.algorithm.c_str(),
                 why && *why ? why : "unknown algorithm (see collx-info for the names)");
    return kExitUsage;
  }
  if (detect_launcher(process_env()).empty()) {
    // Checks that need the rank count, done here too so they fail before any rank starts.
    if (options.coll == BenchColl::kSendrecv && options.np < 2) {
      std::fprintf(stderr, "collx-bench: sendrecv needs at least 2 ranks (collx has no send to self)\n");
      return kExitUsage;
    }
    if (bench_coll_rooted(options.coll) && !options.all_roots && options.root >= options.np) {
      std::fprintf(stderr, "collx-bench: root %d is not a rank (--np %d)\n", options.root, options.np);
      return kExitUsage;
    }
    if (options.plot_path.empty()) return spawn_local_ranks(options.np, argv);
    // --plot: the ranks write this run's JSON (to --json's file or a temporary one) and
    // know nothing of the plot; this process draws it once they are done.
    std::string json = options.json_path;
    const bool temp = json.empty();
    if (temp && (json = temp_json_path()).empty()) {
      std::fprintf(stderr, "collx-bench: --plot: cannot create a temporary file\n");
      return kExitFailure;
    }
    std::vector<std::string> args{argv[0]};
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--plot" || a == "--plot-add") { ++i; continue; }
      if (a.rfind("--plot=", 0) == 0 || a.rfind("--plot-add=", 0) == 0) continue;
      args.push_back(a);
    }
    if (temp) args.push_back("--json=" + json);
    std::vector<char*> child_argv;
    for (std::string& a : args) child_argv.push_back(&a[0]);
    child_argv.push_back(nullptr);
    int code = spawn_local_ranks(options.np, child_argv.data());
    if (code == kExitOk || code == kExitWrongResults) {
      const int plot = write_plot(options, json);
      if (code == kExitOk) code = plot;
    }
    if (temp) std::remove(json.c_str());
    return code;
  }
  if (options.plot_path.empty()) return run_rank(options, algorithm);
  // Under a launcher only rank 0 writes the JSON, so only rank 0 plots.
  const char* rank_var = std::getenv(detect_launcher(process_env()).c_str());
  const bool rank0 = rank_var && std::atoi(rank_var) == 0;
  const bool temp = options.json_path.empty() && rank0;
  if (temp && (options.json_path = temp_json_path()).empty()) {
    std::fprintf(stderr, "collx-bench: --plot: cannot create a temporary file\n");
    return kExitFailure;
  }
  int code = run_rank(options, algorithm);
  if (rank0 && (code == kExitOk || code == kExitWrongResults)) {
    const int plot = write_plot(options, options.json_path);
    if (code == kExitOk) code = plot;
  }
  if (temp) std::remove(options.json_path.c_str());
  return code;
}
