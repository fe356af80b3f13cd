// collx-bench dp: overlap efficiency of the data-parallel gradient reducer. Three timings
// per step, slowest rank, median over --iters: the simulated backward alone, the
// reduction alone (every tensor marked at once), and both overlapped (each tensor marked
// as it is produced). Efficiency = overlapped / max(compute, comm); target <= 1.1.
#include "bench/collx_bench/bench_dp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/collx_bench/launch_env.h"
#include "bench/collx_bench/launcher.h"

namespace collx_bench {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double slowest(double v, collx_comm_t comm) {
  collx_allreduce(&v, &v, 1, COLLX_FLOAT64, COLLX_MAX, comm, nullptr);
  return v;
}

bool parse_strategy_args(int argc, char** argv, StrategyArgs* a, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      *error = "usage: collx-bench dp|zero [--np N] [--elems N] [--tensors N] [--buckets N] [--iters N] "
               "[--compute-ratio X] [--comm fp32|bf16]";
      return false;
    }
    if (i + 1 >= argc) {
      *error = "missing value after " + f;
      return false;
    }
    const char* v = argv[++i];
    if (f == "--np") a->np = std::atoi(v);
    else if (f == "--elems") a->elems = std::strtoull(v, nullptr, 10);
    else if (f == "--tensors") a->tensors = std::atoi(v);
    else if (f == "--buckets") a->buckets = std::atoi(v);
    else if (f == "--iters") a->iters = std::atoi(v);
    else if (f == "--compute-ratio") a->compute_ratio = std::atof(v);
    else if (f == "--comm") {
      const std::string c = v;
      if (c != "fp32" && c != "bf16") {
        *error = "--comm takes fp32 or bf16";
        return false;
      }
      a->comm_dtype = c == "bf16" ? COLLX_BFLOAT16 : COLLX_FLOAT32;
    } else {
      *error = "unknown flag " + f;
      return false;
    }
  }
  if (a->np < 1 || a->tensors < 1 || a->buckets < 1 || a->iters < 1 || a->elems < static_cast<size_t>(a->tensors) ||
      a->compute_ratio < 0) {
    *error = "--np, --tensors, --buckets, --iters must be >= 1, --elems >= --tensors, --compute-ratio >= 0";
    return false;
  }
  return true;
}

int run_strategy(int argc, char** argv, const StrategyArgs& args, int (*body)(const StrategyArgs&, collx_comm_t)) {
  (void)argc;
  if (detect_launcher(process_env()).empty()) return spawn_local_ranks(args.np, argv);
  collx_comm_t world = nullptr;
  if (collx_comm_create_from_env(nullptr, &world) != COLLX_OK) {
    std::fprintf(stderr, "collx-bench: %s\n", collx_last_error(nullptr));
    return kExitFailure;
  }
  const int code = body(args, world);
  collx_comm_destroy(world);
  return code;
}

collx_layout_t strategy_layout(const StrategyArgs& args, int32_t dp, int32_t partition) {
  collx_layout_config_t c;
  collx_layout_config_init(&c, sizeof c);
  c.dp_size = dp;
  c.partition = partition;
  c.bucket_elems = args.elems / static_cast<size_t>(args.buckets);
  collx_layout_t l = nullptr;
  if (collx_layout_create(&c, &l) != COLLX_OK) return nullptr;
  const size_t each = args.elems / static_cast<size_t>(args.tensors);
  for (int t = 0; t < args.tensors; ++t) collx_layout_add(l, static_cast<uint64_t>(t), each, COLLX_FLOAT32, 0);
  if (collx_layout_finalize(l) != COLLX_OK) {
    collx_layout_destroy(l);
    return nullptr;
  }
  return l;
}

namespace {

enum class Mode { kCompute, kComm, kOverlap };

// One step of the simulated backward: tensors produced last-registered first, each after
// `per_tensor_ms` of "compute"; marked as produced (overlap), all at the end (comm), or
// never (compute alone).
bool step(collx_dp_t dp, const StrategyArgs& a, Mode mode, double per_tensor_ms) {
  if (collx_dp_zero(dp) != COLLX_OK) return false;
  const size_t each = a.elems / static_cast<size_t>(a.tensors);
  for (int t = a.tensors - 1; t >= 0; --t) {
    if (mode != Mode::kComm) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(per_tensor_ms));
    float* g = nullptr;
    collx_dp_grad_ptr(dp, static_cast<uint64_t>(t), &g);
    std::fill(g, g + each, 0.001f * static_cast<float>(t));
    if (mode == Mode::kOverlap && collx_dp_mark_ready(dp, static_cast<uint64_t>(t)) != COLLX_OK) return false;
  }
  if (mode == Mode::kCompute) return true;
  if (mode == Mode::kComm)
    for (int t = a.tensors - 1; t >= 0; --t)
      if (collx_dp_mark_ready(dp, static_cast<uint64_t>(t)) != COLLX_OK) return false;
  return collx_dp_finish(dp, -1) == COLLX_OK;
}

// Median over iters of the slowest rank's time for one mode.
double timed(collx_dp_t dp, const StrategyArgs& a, Mode mode, double per_tensor_ms, collx_comm_t comm, bool* ok) {
  std::vector<double> t;
  for (int i = 0; i <= a.iters; ++i) {
    collx_barrier(comm, nullptr);
    const double t0 = now_ms();
    *ok = step(dp, a, mode, per_tensor_ms) && *ok;
    const double dt = slowest(now_ms() - t0, comm);
    if (i > 0) t.push_back(dt);  // the first is warm-up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int dp_body(const StrategyArgs& a, collx_comm_t world) {
  int32_t rank = 0, size = 1;
  collx_comm_rank(world, &rank);
  collx_comm_size(world, &size);
  collx_layout_t l = strategy_layout(a, size, COLLX_PART_FLAT);
  collx_dp_config_t c;
  collx_dp_config_init(&c, sizeof c);
  c.comm_dtype = a.comm_dtype;
  collx_dp_t dp = nullptr;
  if (!l || collx_dp_create(world, l, &c, nullptr, &dp) != COLLX_OK) {
    std::fprintf(stderr, "collx-bench dp: %s\n", collx_dp_last_error(nullptr));
    return kExitFailure;
  }
  size_t nb = 0;
  collx_layout_num_buckets(l, &nb);
  bool ok = true;
  const double comm_ms = timed(dp, a, Mode::kComm, 0, world, &ok);
  const double per_tensor = comm_ms * a.compute_ratio / a.tensors;
  const double compute_ms = timed(dp, a, Mode::kCompute, per_tensor, world, &ok);
  const double overlap_ms = timed(dp, a, Mode::kOverlap, per_tensor, world, &ok);
  const double eff = overlap_ms / std::max(compute_ms, comm_ms);
  if (rank == 0) {
    std::printf("# collx-bench dp: %d ranks, %zu float32 elements (%.1f MiB) in %d tensors, %zu buckets, comm %s\n",
                size, a.elems, a.elems * 4.0 / (1 << 20), a.tensors, nb, collx_datatype_name(static_cast<collx_datatype_t>(a.comm_dtype)));
    std::printf("# %12s %12s %12s %12s %10s\n", "compute_ms", "comm_ms", "step_ms", "max_ms", "step/max");
    std::printf("  %12.3f %12.3f %12.3f %12.3f %10.3f  %s\n", compute_ms, comm_ms, overlap_ms,
                std::max(compute_ms, comm_ms), eff, eff <= 1.1 ? "(target <= 1.1 met)" : "(target <= 1.1 missed)");
  }
  collx_dp_destroy(dp);
  collx_layout_destroy(l);
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int bench_dp_main(int argc, char** argv) {
  StrategyArgs a;
  std::string error;
  if (!parse_strategy_args(argc, argv, &a, &error)) {
    std::fprintf(stderr, "collx-bench dp: %s\n", error.c_str());
    return kExitUsage;
  }
  return run_strategy(argc, argv, a, dp_body);
}

}  // namespace collx_bench
