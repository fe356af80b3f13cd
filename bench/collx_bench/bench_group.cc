// collx-bench group: what grouping gains on many small all-reduces. For each number of calls,
// the same all-reduces run one by one and inside collx_group_start/end (fused into one
// message up to COLLX_GROUP_FUSE_BYTES), alternating round by round so both see the same
// machine load; the table gives the median iteration time of each and their ratio, and
// checks that the grouped results equal the separate ones bit for bit.
#include "bench/collx_bench/bench_group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/bench_dp.h"
#include "bench/collx_bench/launcher.h"

namespace collx_bench {
namespace {

struct GroupArgs {
  int max_calls = 64;     // --group N: the largest number of all-reduces per iteration
  uint64_t bytes = 256;   // --bytes: size of each all-reduce
  int iters = 100;        // --iters: iterations per round
  int rounds = 5;         // --rounds: alternating rounds (the median is reported)
};

GroupArgs g_args;  // read by the rank body (run_strategy takes a plain function)

bool parse_group_args(int argc, char** argv, GroupArgs* g, StrategyArgs* s, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) {
      *error = "flag " + f + " needs a value (flags: --np N, --group N, --bytes SIZE, --iters N, --rounds N)";
      return false;
    }
    const std::string v = argv[++i];
    const long n = std::strtol(v.c_str(), nullptr, 10);
    if (f == "--np" && n >= 1) {
      s->np = static_cast<int>(n);
    } else if (f == "--group" && n >= 1 && n <= 4096) {
      g->max_calls = static_cast<int>(n);
    } else if (f == "--bytes" && parse_size(v, &g->bytes) && g->bytes >= 4) {
      g->bytes -= g->bytes % 4;
    } else if (f == "--iters" && n >= 1) {
      g->iters = static_cast<int>(n);
    } else if (f == "--rounds" && n >= 1) {
      g->rounds = static_cast<int>(n);
    } else {
      *error = "invalid flag or value: " + f + " " + v;
      return false;
    }
  }
  return true;
}

// One iteration: `calls` float32 sum all-reduces, grouped or not. False on a failed call.
// Host buffers stated as such (as collx-bench allreduce does): both forms skip the memory
// kind detection, which is not what this measures.
bool iteration(std::vector<std::vector<float>>& in, std::vector<std::vector<float>>& out, int calls, bool grouped,
               collx_comm_t comm) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = COLLX_MEM_HOST;
  if (grouped && collx_group_start() != COLLX_OK) return false;
  for (int c = 0; c < calls; ++c) {
    if (collx_allreduce(in[c].data(), out[c].data(), in[c].size(), COLLX_FLOAT32, COLLX_SUM, comm, &opts) != COLLX_OK)
      return false;
  }
  return !grouped || collx_group_end() == COLLX_OK;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int group_body(const StrategyArgs&, collx_comm_t world) {
  const GroupArgs& a = g_args;
  int32_t rank = 0, size = 1;
  collx_comm_rank(world, &rank);
  collx_comm_size(world, &size);
  const char* transport = "";
  collx_comm_transport(world, &transport);
  const char* fuse = std::getenv("COLLX_GROUP_FUSE_BYTES");
  if (rank == 0) {
    std::printf("# collx-bench group: %d ranks over %s, float32 sum all-reduces of %llu bytes each, "
                "%d rounds x %d iterations, COLLX_GROUP_FUSE_BYTES=%s\n",
                size, transport, static_cast<unsigned long long>(a.bytes), a.rounds, a.iters, fuse ? fuse : "(default)");
    std::printf("# %6s %14s %14s %9s %7s\n", "calls", "separate_us", "grouped_us", "speedup", "#wrong");
  }
  const size_t count = a.bytes / 4;
  std::vector<std::vector<float>> in(a.max_calls), separate(a.max_calls), grouped(a.max_calls);
  for (int c = 0; c < a.max_calls; ++c) {
    in[c].resize(count);
    for (size_t i = 0; i < count; ++i) in[c][i] = 0.1f * static_cast<float>((rank * 31 + c * 7 + static_cast<int>(i)) % 97);
    separate[c].assign(count, 0.0f);
    grouped[c].assign(count, 0.0f);
  }
  std::vector<int> sweep;
  for (int calls = 1; calls < a.max_calls; calls *= 4) sweep.push_back(calls);
  sweep.push_back(a.max_calls);
  bool any_wrong = false;
  for (int calls : sweep) {
    std::vector<double> t_separate, t_grouped;
    bool ok = true;
    for (int r = 0; r < a.rounds && ok; ++r) {
      for (bool g : {false, true}) {
        ok = ok && iteration(in, g ? grouped : separate, calls, g, world);  // warm-up
        collx_barrier(world, nullptr);
        for (int i = 0; i < a.iters && ok; ++i) {
          const double t0 = now_ms();
          ok = iteration(in, g ? grouped : separate, calls, g, world);
          (g ? t_grouped : t_separate).push_back((now_ms() - t0) * 1000.0);
        }
      }
    }
    if (!ok) {
      std::fprintf(stderr, "collx-bench group: rank %d: %s\n", rank, collx_last_error(nullptr)[0] ? collx_last_error(nullptr) : collx_last_error(world));
      collx_comm_abort(world);
      return kExitFailure;
    }
    double wrong = 0;
    for (int c = 0; c < calls; ++c) {
      for (size_t i = 0; i < count; ++i) wrong += std::memcmp(&separate[c][i], &grouped[c][i], 4) != 0;
    }
    collx_allreduce(&wrong, &wrong, 1, COLLX_FLOAT64, COLLX_SUM, world, nullptr);
    any_wrong = any_wrong || wrong > 0;
    // Per iteration medians (robust to the scheduler stalls of a loaded machine), then the
    // slowest rank's.
    const double s = slowest(median(t_separate), world), g = slowest(median(t_grouped), world);
    if (rank == 0) std::printf("  %6d %14.1f %14.1f %9.2f %7.0f\n", calls, s, g, s / g, wrong);
  }
  if (rank == 0)
    std::printf("# separate_us / grouped_us: median over rounds x iterations of one iteration's time (all its "
                "calls), slowest rank's median; speedup = separate / grouped\n");
  return any_wrong ? kExitWrongResults : kExitOk;
}

}  // namespace

int bench_group_main(int argc, char** argv) {
  StrategyArgs s;
  std::string error;
  if (!parse_group_args(argc, argv, &g_args, &s, &error)) {
    std::fprintf(stderr, "collx-bench group: %s\n", error.c_str());
    return kExitUsage;
  }
  return run_strategy(argc, argv, s, group_body);
}

}  // namespace collx_bench
