// collx-bench quant: for each size, the all-gather and the reduce-scatter of the same
// float32 data as float32, as bfloat16, and quantized to int8 and int4 (block scales).
// Columns as nccl-tests where they apply (size = the float32 bytes of the whole array,
// count = elements per rank, time = median over -n iterations of the slowest rank, algbw
// and busbw from the float32 size so the rows compare the same work), plus:
//   wire(B)   bytes this rank sends to other ranks per call ((n-1) x one rank's message)
//   wire/fp32 and time/fp32: against the float32 row of the same size, same run
//   maxerr    the largest |result - float32 result| over this rank's output
#include "bench/collx_bench/bench_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/bench_dp.h"
#include "bench/collx_bench/format.h"
#include "bench/collx_bench/launcher.h"
#include "bench/collx_bench/sweep.h"

namespace collx_bench {
namespace {

struct QuantArgs {
  int np = 4;
  uint64_t min_bytes = 1 << 16, max_bytes = 1 << 24, factor = 4;
  int iters = 10, warmup = 2;
  size_t block = 256;
};

const char* kUsage =
    "usage: collx-bench quant [--np N] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP] "
    "[--block ELEMS]\n";

bool parse(int argc, char** argv, QuantArgs* a, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      *error = kUsage;
      return false;
    }
    if (i + 1 >= argc) {
      *error = "missing value after " + f;
      return false;
    }
    const std::string v = argv[++i];
    bool ok = true;
    if (f == "--np") a->np = std::atoi(v.c_str());
    else if (f == "-b") ok = parse_size(v, &a->min_bytes);
    else if (f == "-e") ok = parse_size(v, &a->max_bytes);
    else if (f == "-f") a->factor = std::strtoull(v.c_str(), nullptr, 10);
    else if (f == "-n") a->iters = std::atoi(v.c_str());
    else if (f == "-w") a->warmup = std::atoi(v.c_str());
    else if (f == "--block") a->block = std::strtoull(v.c_str(), nullptr, 10);
    else {
      *error = "unknown flag " + f + "\n" + kUsage;
      return false;
    }
    if (!ok) {
      *error = "bad size " + v + " after " + f;
      return false;
    }
  }
  if (a->np < 1 || a->iters < 1 || a->warmup < 0 || a->factor < 2 || a->min_bytes < 4 || a->min_bytes > a->max_bytes) {
    *error = "need --np >= 1, -n >= 1, -w >= 0, -f >= 2 and 4 <= -b <= -e";
    return false;
  }
  return true;
}

enum class Variant { kFp32, kBf16, kInt8, kInt4 };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kFp32: return "float";
    case Variant::kBf16: return "bfloat16";
    case Variant::kInt8: return "q-int8";
    case Variant::kInt4: return "q-int4";
  }
  return "?";
}

struct Bufs {
  std::vector<float> in, out, ref;  // float32 data, output, the float32 row's output
  std::vector<uint16_t> in16, out16;
};

// One call of `coll` ("allgather" or "reducescatter") in variant v, n elements per rank.
collx_status_t call(bool gather, Variant v, size_t n, size_t block, Bufs* b, collx_comm_t comm) {
  collx_quant_config_t c;
  collx_quant_config_init(&c, sizeof c);
  c.block_elems = block;
  c.bits = v == Variant::kInt4 ? 4 : 8;
  switch (v) {
    case Variant::kFp32:
      return gather ? collx_allgather(b->in.data(), b->out.data(), n, COLLX_FLOAT32, comm, nullptr)
                    : collx_reduce_scatter(b->in.data(), b->out.data(), n, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
    case Variant::kBf16:
      return gather ? collx_allgather(b->in16.data(), b->out16.data(), n, COLLX_BFLOAT16, comm, nullptr)
                    : collx_reduce_scatter(b->in16.data(), b->out16.data(), n, COLLX_BFLOAT16, COLLX_SUM, comm, nullptr);
    default:
      return gather ? collx_quant_allgather(b->in.data(), b->out.data(), n, COLLX_FLOAT32, comm, &c)
                    : collx_quant_reduce_scatter(b->in.data(), b->out.data(), n, COLLX_FLOAT32, COLLX_SUM, comm, &c);
  }
}

// Bytes one rank sends to the others per call: (n-1) messages of one rank's piece.
double wire_bytes(Variant v, size_t n, size_t block, int nranks) {
  size_t msg = n * 4;
  if (v == Variant::kBf16) msg = n * 2;
  if (v == Variant::kInt8 || v == Variant::kInt4) {
    collx_quant_config_t c;
    collx_quant_config_init(&c, sizeof c);
    c.block_elems = block;
    c.bits = v == Variant::kInt4 ? 4 : 8;
    collx_quant_packed_bytes(n, &c, &msg);
  }
  return static_cast<double>(msg) * (nranks - 1);
}

float bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double max_error(Variant v, const Bufs& b, size_t out_n) {
  double worst = 0;
  for (size_t i = 0; i < out_n; ++i) {
    const double y = v == Variant::kBf16 ? bf16_value(b.out16[i]) : b.out[i];
    worst = std::max(worst, std::fabs(y - b.ref[i]));
  }
  return worst;
}

int quant_body(const QuantArgs& a, collx_comm_t world) {
  int32_t rank = 0, size = 1;
  collx_comm_rank(world, &rank);
  collx_comm_size(world, &size);
  std::string error;
  const std::vector<uint64_t> sizes = size_sweep(a.min_bytes, a.max_bytes, 0, a.factor, &error);
  if (rank == 0) {
    std::printf("# collx-bench quant: %d ranks, block_elems %zu, -n %d -w %d; float32 data N(0,1) x 2^(rank %% 5)\n",
                size, a.block, a.iters, a.warmup);
    std::printf("# %-13s %12s %10s %8s %12s %10s %8s %8s %9s %9s %10s\n", "collective", "size(B)", "count",
                "type", "wire(B)", "time(us)", "algbw", "busbw", "wire/fp32", "time/fp32", "maxerr");
    std::printf("# %-13s %12s %10s %8s %12s %10s %8s %8s %9s %9s %10s\n", "", "", "(elements)", "", "(per rank)",
                "", "(GB/s)", "(GB/s)", "", "", "");
  }
  bool ok = true;
  for (bool gather : {true, false}) {
    for (uint64_t bytes : sizes) {
      const size_t n = std::max<size_t>(1, bytes / 4 / static_cast<size_t>(size));  // per-rank elements
      const size_t in_n = gather ? n : n * size, out_n = gather ? n * size : n;
      Bufs b;
      b.in.resize(in_n);
      for (size_t i = 0; i < in_n; ++i)
        b.in[i] = std::ldexp(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)), rank % 5);
      b.in16.resize(in_n);
      for (size_t i = 0; i < in_n; ++i) {
        uint32_t u;
        std::memcpy(&u, &b.in[i], 4);
        b.in16[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      }
      b.out.assign(out_n, 0.0f);
      b.out16.assign(out_n, 0);
      double fp32_time = 0, fp32_wire = 0;
      for (Variant v : {Variant::kFp32, Variant::kBf16, Variant::kInt8, Variant::kInt4}) {
        std::vector<double> times;
        for (int it = 0; it < a.warmup + a.iters; ++it) {
          collx_barrier(world, nullptr);
          const double t0 = now_ms();
          const collx_status_t st = call(gather, v, n, a.block, &b, world);
          const double dt = slowest((now_ms() - t0) * 1000.0, world);
          if (st != COLLX_OK) {
            std::fprintf(stderr, "collx-bench quant: rank %d: %s: %s %s\n", rank, variant_name(v),
                         collx_status_name(st), collx_last_error(nullptr));
            return kExitFailure;
          }
          if (it >= a.warmup) times.push_back(dt);
        }
        std::sort(times.begin(), times.end());
        const double t = times[times.size() / 2];
        if (v == Variant::kFp32) b.ref = b.out;
        double err = max_error(v, b, out_n);
        collx_allreduce(&err, &err, 1, COLLX_FLOAT64, COLLX_MAX, world, nullptr);
        const double wire = wire_bytes(v, n, a.block, size);
        if (v == Variant::kFp32) fp32_time = t, fp32_wire = wire;
        const uint64_t fp32_bytes = static_cast<uint64_t>(n) * 4 * static_cast<uint64_t>(size);
        const double algbw = algbw_gbs(fp32_bytes, t);
        const double busbw = algbw * busbw_factor(gather ? BenchColl::kAllgather : BenchColl::kReduceScatter, size);
        if (rank == 0)
          std::printf("  %-13s %12llu %10zu %8s %12.0f %10s %8s %8s %9.3f %9.3f %10.3g\n",
                      gather ? "allgather" : "reducescatter", static_cast<unsigned long long>(fp32_bytes), n,
                      variant_name(v), wire, float_str(t, 10).c_str(), float_str(algbw, 8).c_str(),
                      float_str(busbw, 8).c_str(), fp32_wire > 0 ? wire / fp32_wire : 0.0,
                      fp32_time > 0 ? t / fp32_time : 0.0, err);
        if (!std::isfinite(err)) ok = false;
      }
    }
  }
  if (rank == 0)
    std::printf("# wire = bytes each rank sends to the others per call; ratios against the float row of the same\n"
                "# size in this run; maxerr against the float32 result (reducescatter: SUM over ranks)\n");
  return ok ? kExitOk : kExitWrongResults;
}

}  // namespace

int bench_quant_main(int argc, char** argv) {
  static QuantArgs args;  // read by the rank body, which run_strategy calls without it
  std::string error;
  if (!parse(argc, argv, &args, &error)) {
    std::fprintf(stderr, "collx-bench quant: %s\n", error.c_str());
    return kExitUsage;
  }
  StrategyArgs ranks;
  ranks.np = args.np;
  return run_strategy(argc, argv, ranks, [](const StrategyArgs&, collx_comm_t world) { return quant_body(args, world); });
}

}  // namespace collx_bench
