#include "bench/collx_bench/bench_soak.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/collx_bench/bench_dp.h"
#include "bench/collx_bench/launcher.h"
#include "collx/collx.h"

namespace collx_bench {
namespace {

struct SoakArgs {
  int np = 4;
  long ops = 100000;    // back-to-back all-reduces
  long cycles = 1000;   // communicator create/destroy cycles
  int count = 16;       // float32 elements per all-reduce
  long rss_threshold_kib = 4096;
  long fd_threshold = 0;  // growth above this many descriptors is a leak
};

bool parse_long(const char* text, long min, long* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < min) return false;
  *out = v;
  return true;
}

bool parse_soak_args(int argc, char** argv, SoakArgs* a, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      *error = "flag " + flag + " needs a value";
      return false;
    }
    long v = 0;
    if (!parse_long(argv[++i], 0, &v)) {
      *error = "bad value '" + std::string(argv[i]) + "' for " + flag;
      return false;
    }
    if (flag == "--np" && v >= 1) a->np = static_cast<int>(v);
    else if (flag == "--ops") a->ops = v;
    else if (flag == "--cycles") a->cycles = v;
    else if (flag == "--count" && v >= 1 && v <= 1024) a->count = static_cast<int>(v);
    else if (flag == "--rss-threshold-kib") a->rss_threshold_kib = v;
    else if (flag == "--fd-threshold") a->fd_threshold = v;
    else {
      *error = "unknown flag or bad value: " + flag + " " + argv[i];
      return false;
    }
  }
  return true;
}

// Resident set in KiB (/proc/self/statm, second field, in pages).
long rss_kib() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return -1;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// Open descriptors (entries of /proc/self/fd, less the one opendir holds).
long open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;
}

struct Sample {
  long rss = 0;
  long fds = 0;
};
Sample sample() { return {rss_kib(), open_fds()}; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Max over ranks of a value (every rank gets it).
long max_over_ranks(long v, collx_comm_t comm) {
  int64_t in = v, out = v;
  collx_allreduce(&in, &out, 1, COLLX_INT64, COLLX_MAX, comm, nullptr);
  return static_cast<long>(out);
}

bool small_allreduces(collx_comm_t comm, long n, int count) {
  float in[1024], out[1024];
  for (int i = 0; i < count; ++i) in[i] = 1.0f;
  for (long i = 0; i < n; ++i) {
    if (collx_allreduce(in, out, static_cast<size_t>(count), COLLX_FLOAT32, COLLX_SUM, comm, nullptr) != COLLX_OK) {
      std::fprintf(stderr, "collx-bench soak: all-reduce %ld: %s\n", i, collx_last_error(comm));
      return false;
    }
  }
  return true;
}

// Even cycles dup the world, odd ones split it (one color); each new communicator runs one
// all-reduce, so its transport connections are really made, then is destroyed.
bool create_destroy(collx_comm_t world, long cycles, int count) {
  for (long i = 0; i < cycles; ++i) {
    collx_comm_t c = nullptr;
    const collx_status_t st = (i % 2 == 0) ? collx_comm_dup(world, &c) : collx_comm_split(world, 0, 0, &c);
    if (st != COLLX_OK || !small_allreduces(c, 1, count)) {
      std::fprintf(stderr, "collx-bench soak: cycle %ld: %s\n", i, collx_last_error(st != COLLX_OK ? world : c));
      collx_comm_destroy(c);
      return false;
    }
    collx_comm_destroy(c);
  }
  return true;
}

// Runs one phase between two samples; on rank 0 prints its row (growth is the worst rank's).
bool phase(const char* name, long n, collx_comm_t world, int rank, const SoakArgs& a, bool* flat,
           bool (*body)(collx_comm_t, long, int)) {
  collx_barrier(world, nullptr);
  const Sample before = sample();
  const auto t0 = std::chrono::steady_clock::now();
  const bool ok = body(world, n, a.count);
  const double secs = seconds_since(t0);
  collx_barrier(world, nullptr);
  const Sample after = sample();
  const long rss_growth = max_over_ranks(after.rss - before.rss, world);
  const long fd_growth = max_over_ranks(after.fds - before.fds, world);
  const bool phase_flat = rss_growth < a.rss_threshold_kib && fd_growth <= a.fd_threshold;
  *flat = *flat && phase_flat;
  if (rank == 0) {
    std::printf("  %-16s %9ld %9.2f %10.2f %10ld %10ld %+9ld %6ld %6ld %+5ld  %s\n", name, n, secs,
                n > 0 ? secs * 1e6 / static_cast<double>(n) : 0.0, before.rss, after.rss, rss_growth, before.fds,
                after.fds, fd_growth, phase_flat ? "flat" : "GROWS");
  }
  return ok;
}

int soak_body(const SoakArgs& a, collx_comm_t world) {
  int32_t rank = 0, size = 1;
  collx_comm_rank(world, &rank);
  collx_comm_size(world, &size);
  // Warm-up: first-use allocations (scratch buffers, connections, store keys) are not leaks.
  if (!small_allreduces(world, 100, a.count) || !create_destroy(world, 4, a.count)) return kExitFailure;
  if (rank == 0) {
    std::printf("# collx-bench soak: %d ranks, all-reduce of %d float32; thresholds: RSS +%ld KiB, fds +%ld\n",
                size, a.count, a.rss_threshold_kib, a.fd_threshold);
    std::printf("# growth = the largest of any rank; RSS and fds before/after are rank 0's\n");
    std::printf("  %-16s %9s %9s %10s %10s %10s %9s %6s %6s %5s  %s\n", "phase", "n", "seconds", "us/each",
                "rss_KiB", "rss_after", "growth", "fds", "after", "grow", "verdict");
  }
  bool flat = true;
  bool ok = phase("allreduce", a.ops, world, rank, a, &flat, small_allreduces);
  ok = phase("comm_create_free", a.cycles, world, rank, a, &flat, create_destroy) && ok;
  if (rank == 0) std::printf("# verdict: %s\n", !ok ? "FAILED (a call failed)" : flat ? "flat" : "GROWS (leak?)");
  if (!ok) return kExitFailure;
  return flat ? kExitOk : kExitWrongResults;
}

}  // namespace

int bench_soak_main(int argc, char** argv) {
  static SoakArgs args;  // run_strategy's body takes StrategyArgs; soak's own live here
  std::string error;
  if (!parse_soak_args(argc, argv, &args, &error)) {
    std::fprintf(stderr, "collx-bench soak: %s\n", error.c_str());
    return kExitUsage;
  }
  StrategyArgs launch;
  launch.np = args.np;
  return run_strategy(argc, argv, launch, [](const StrategyArgs&, collx_comm_t world) { return soak_body(args, world); });
}

}  // namespace collx_bench
