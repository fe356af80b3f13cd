// collx-bench: nccl-tests-style bandwidth benchmark of collx collectives, no MPI needed.
// Usage: collx-bench <collective> [flags] (collx-bench -h, or usage_text in args.cc).
// Without a launcher it starts --np local ranks (launcher.cc); under one it is a rank.
#include <cstdio>
#include <string>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/bench_rank.h"
#include "bench/collx_bench/launch_env.h"
#include "bench/collx_bench/launcher.h"
#include "bench/collx_bench/sweep.h"
#include "collx/collx.h"

int main(int argc, char** argv) {
  using namespace collx_bench;
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
    return spawn_local_ranks(options.np, argv);
  }
  return run_rank(options, algorithm);
}
