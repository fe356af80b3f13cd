#include "bench/collx_bench/bench_rank.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/collx_bench/explain_tune.h"
#include "bench/collx_bench/format.h"
#include "bench/collx_bench/json.h"
#include "bench/collx_bench/launch_env.h"
#include "bench/collx_bench/launcher.h"
#include "bench/collx_bench/runner.h"
#include "bench/collx_bench/sweep.h"

namespace collx_bench {

namespace {

// What each rank contributes to the "# Using ranks" block (exchanged with collx_allgather).
struct WireRankInfo {
  int32_t pid;
  int32_t local_rank;
  char host[256];
};

// Reports a failed call: every rank on stderr, rank 0 also as nccl-tests' "# error:" line.
std::string describe_failure(collx_comm_t comm, collx_status_t st, const std::string& what) {
  const std::string name = collx_status_name(st);
  const char* msg = collx_last_error(comm);
  std::string s = what + " failed: ";
  // collx's messages usually start with the status name already; never print it twice.
  if (!msg || !*msg) return s + name;
  if (std::string(msg).compare(0, name.size(), name) != 0) s += name + ": ";
  return s + msg;
}

class RankRun {
 public:
  RankRun(const Options& o, collx_algorithm_t algorithm) : o_(o), algorithm_(algorithm) {}
  ~RankRun() {
    if (ctx_.comm) collx_comm_destroy(ctx_.comm);
  }

  int run() {
    int code = join();
    if (code != kExitOk) return code;
    if ((code = exchange_rank_info()) != kExitOk) return code;
    if (o_.coll == BenchColl::kSendrecv && ctx_.nranks < 2) {
      if (ctx_.rank == 0) std::fprintf(stderr, "collx-bench: sendrecv needs at least 2 ranks (collx has no send to self)\n");
      return kExitUsage;
    }
    if (!o_.all_roots && bench_coll_rooted(o_.coll) && o_.root >= ctx_.nranks) {
      if (ctx_.rank == 0) {
        std::fprintf(stderr, "collx-bench: root %d is not a rank (the job has %d ranks)\n", o_.root, ctx_.nranks);
      }
      return kExitUsage;
    }
    if (o_.explain) return explain_sweep(o_, ctx_.comm, ctx_.rank, ctx_.nranks);
    if (!o_.tune_path.empty()) return tune_transport(o_, ctx_.comm, ctx_.rank, ctx_.nranks);
    if (ctx_.rank == 0) print_header();
    code = sweep();
    if (ctx_.rank == 0) finish(code);
    if (code == kExitOk && report_.wrong_total > 0) code = kExitWrongResults;
    return code;
  }

 private:
  int join() {
    collx_config_t cfg;
    collx_config_init(&cfg, sizeof(cfg));
    cfg.transports = o_.transport_mask;
    if (o_.timeout_s > 0) cfg.timeout_ms = static_cast<int64_t>(o_.timeout_s * 1000.0);
    // Open MPI, PMI and Slurm: map their rank variables; COLLX_* and torchrun's the
    // library reads itself.
    int rank = 0, size = 0;
    bool found = false;
    std::string error;
    if (launcher_rank(process_env(), &rank, &size, &found, &error)) {
      cfg.rank = rank;
      cfg.world_size = size;
    } else if (found) {
      std::fprintf(stderr, "collx-bench: %s\n", error.c_str());
      return kExitUsage;
    }
    const collx_status_t st = collx_comm_create_from_env(&cfg, &ctx_.comm);
    if (st != COLLX_OK) {
      ctx_.comm = nullptr;
      std::string msg = describe_failure(nullptr, st, "collx_comm_create_from_env");
      if (st == COLLX_ERR_UNSUPPORTED && o_.transport != "tcp") {
        msg = "transport '" + o_.transport + "' is not supported by this libcollx (" + msg + "); use -t tcp";
      }
      std::fprintf(stderr, "collx-bench: %s\n", msg.c_str());
      return kExitFailure;
    }
    collx_comm_rank(ctx_.comm, &ctx_.rank);
    collx_comm_size(ctx_.comm, &ctx_.nranks);
    collx_opts_init(&ctx_.opts, sizeof(ctx_.opts));
    ctx_.opts.algorithm = algorithm_;
    ctx_.opts.mem_kind = COLLX_MEM_HOST;  // skip detection: these are host buffers
    ctx_.opts.premul_scalar = kPremulScalar;
    return kExitOk;
  }

  int fail(collx_status_t st, const std::string& what) {
    const std::string msg = describe_failure(ctx_.comm, st, what);
    std::fprintf(stderr, "collx-bench: rank %d: %s\n", ctx_.rank, msg.c_str());
    if (ctx_.rank == 0) {
      std::printf("# error: %s\n", msg.c_str());
      report_.errors.push_back(msg);
    }
    // Peers waiting on this rank fail now (COLLX_ERR_REMOTE) instead of at their deadline.
    collx_comm_abort(ctx_.comm);
    return kExitFailure;
  }

  int exchange_rank_info() {
    WireRankInfo mine;
    std::memset(&mine, 0, sizeof(mine));
    mine.pid = static_cast<int32_t>(getpid());
    int32_t local_rank = 0;
    collx_comm_local_rank(ctx_.comm, &local_rank);
    mine.local_rank = local_rank;
    gethostname(mine.host, sizeof(mine.host) - 1);
    std::vector<WireRankInfo> all(static_cast<size_t>(ctx_.nranks));
    // Default options: a forced algorithm (-a) applies to the measured collective only.
    const collx_status_t st = collx_allgather(&mine, all.data(), sizeof(mine), COLLX_UINT8, ctx_.comm, nullptr);
    if (st != COLLX_OK) return fail(st, "collx_allgather of the rank list");
    for (int r = 0; r < ctx_.nranks; ++r) {
      const WireRankInfo& w = all[static_cast<size_t>(r)];
      RankInfo ri;
      ri.rank = r;
      ri.pid = w.pid;
      ri.local_rank = w.local_rank;
      ri.host.assign(w.host, strnlen(w.host, sizeof(w.host)));
      report_.ranks.push_back(ri);
    }
    return kExitOk;
  }

  // The transport the library picked ("shm", "tcp", ...), whatever -t asked for.
  const char* transport_used() const {
    const char* name = "?";
    collx_comm_transport(ctx_.comm, &name);
    return name;
  }

  void print_header() {
    report_.version = COLLX_VERSION_STRING;
    report_.library_version = collx_get_version_string();
    report_.collective = bench_coll_name(o_.coll);
    report_.nranks = ctx_.nranks;
    if (!o_.json_path.empty()) std::printf("# Writing JSON output to %s\n", o_.json_path.c_str());
    std::printf("# collx-bench version %s collx-headers=%s collx-library=%s\n", COLLX_VERSION_STRING,
                COLLX_VERSION_STRING, report_.library_version.c_str());
    std::printf("# Collective test starting: %s\n", report_.collective.c_str());
    if (o_.coll == BenchColl::kAllgatherv || o_.coll == BenchColl::kGatherv) {
      std::printf("# %s uneven shards: rank r sends (1 + r %% 3) x count elements; size is the whole "
                  "output\n", bench_coll_name(o_.coll));
    }
    if (o_.coll == BenchColl::kReduceScatterv || o_.coll == BenchColl::kScatterv) {
      std::printf("# %s uneven shards: rank r receives (1 + r %% 3) x count elements; size is the whole "
                  "input\n", bench_coll_name(o_.coll));
    }
    if (o_.coll == BenchColl::kAlltoallv) {
      std::printf("# alltoallv uneven blocks: rank s sends rank d (1 + (s + d) %% 3) x count elements, packed; "
                  "size is the largest rank's buffer\n");
    }
    std::printf("# np %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d "
                "validation: %d transport: %s algorithm: %s\n",
                ctx_.nranks, static_cast<unsigned long long>(o_.min_bytes),
                static_cast<unsigned long long>(o_.max_bytes),
                static_cast<unsigned long long>(o_.step_factor > 1 ? o_.step_factor : o_.step_bytes),
                o_.step_factor > 1 ? "factor" : "bytes", o_.warmup_iters, o_.iters, o_.check_iters,
                transport_used(), collx_algorithm_name(algorithm_));
    std::printf("#\n# Using ranks\n");
    for (const RankInfo& ri : report_.ranks) {
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s local rank %2d\n", ri.rank, ri.pid, ri.host.c_str(),
                  ri.local_rank);
    }
    std::printf("%s", table_header().c_str());
    std::fflush(stdout);
  }

  int sweep() {
    std::string error;
    const std::vector<uint64_t> sizes = size_sweep(o_.min_bytes, o_.max_bytes, o_.step_bytes, o_.step_factor, &error);
    if (sizes.empty()) {
      if (ctx_.rank == 0) std::fprintf(stderr, "collx-bench: %s\n", error.c_str());
      return kExitUsage;
    }
    if (!buffers_.allocate(static_cast<size_t>(o_.max_bytes), o_.zero_copy, &error)) {
      std::fprintf(stderr, "collx-bench: rank %d: %s\n", ctx_.rank, error.c_str());
      collx_comm_abort(ctx_.comm);
      return kExitFailure;
    }
    std::vector<int> roots{-1};
    if (bench_coll_rooted(o_.coll)) {
      roots.clear();
      if (o_.all_roots) {
        for (int r = 0; r < ctx_.nranks; ++r) roots.push_back(r);
      } else {
        roots.push_back(o_.root);
      }
    }
    // Collectives without an op run once per datatype, shown as op "none".
    const std::vector<collx_op_t> ops = bench_coll_reduces(o_.coll) ? o_.ops : std::vector<collx_op_t>{COLLX_SUM};
    for (collx_datatype_t dt : o_.datatypes) {
      for (collx_op_t op : ops) {
        for (int root : roots) {
          for (uint64_t size : sizes) {
            const int code = row(dt, op, root, size);
            if (code != kExitOk) return code;
          }
        }
      }
    }
    return kExitOk;
  }

  int row(collx_datatype_t dt, collx_op_t op, int root, uint64_t size) {
    const RowCounts counts = row_counts(o_.coll, size, datatype_bytes(dt), ctx_.nranks);
    CallShape shape;
    shape.coll = o_.coll;
    shape.datatype = dt;
    shape.op = op;
    shape.root = root < 0 ? 0 : root;
    shape.rank = ctx_.rank;
    shape.nranks = ctx_.nranks;
    shape.count = counts.count;

    collx_algorithm_t chosen = COLLX_ALGO_AUTO;
    collx_status_t st = collx_select_algorithm(ctx_.comm, bench_coll_kind(o_.coll), counts.count, dt, &ctx_.opts, &chosen);
    if (st != COLLX_OK) return fail(st, "collx_select_algorithm");

    RowResult r;
    std::string what;
    if ((st = measure(ctx_, shape, buffers_, false, o_.warmup_iters, o_.iters, o_.check_iters, &r.out_of_place, &what)) != COLLX_OK) {
      return fail(st, std::string(bench_coll_name(o_.coll)) + " " + what);
    }
    if (bench_coll_has_in_place(o_.coll) &&
        (st = measure(ctx_, shape, buffers_, true, o_.warmup_iters, o_.iters, o_.check_iters, &r.in_place, &what)) != COLLX_OK) {
      return fail(st, std::string(bench_coll_name(o_.coll)) + " " + what);
    }
    // Time averaged over ranks (nccl-tests -a 1) and wrong elements summed, in one call.
    double totals[4] = {r.out_of_place.time_us, r.in_place.time_us, static_cast<double>(r.out_of_place.wrong),
                        static_cast<double>(r.in_place.wrong)};
    if ((st = collx_allreduce(totals, totals, 4, COLLX_FLOAT64, COLLX_SUM, ctx_.comm, nullptr)) != COLLX_OK) {
      return fail(st, "collx_allreduce of the timings");
    }
    const double factor = busbw_factor(o_.coll, ctx_.nranks);
    Cell* cells[2] = {&r.out_of_place, &r.in_place};
    for (int i = 0; i < 2; ++i) {
      Cell& c = *cells[i];
      if (!c.measured) continue;
      c.time_us = totals[i] / ctx_.nranks;
      c.wrong = static_cast<int64_t>(totals[2 + i]);
      c.algbw = algbw_gbs(counts.bytes, c.time_us);
      c.busbw = c.algbw * factor;
      if (c.checked) report_.wrong_total += c.wrong;
    }
    if (ctx_.rank != 0) return kExitOk;
    r.bytes = counts.bytes;
    r.count = counts.count;
    r.type = datatype_display_name(dt);
    r.redop = bench_coll_reduces(o_.coll) ? op_display_name(op) : "none";
    r.root = root;
    r.algorithm = collx_algorithm_name(chosen);
    std::printf("%s%s%s%s", row_preamble(r.bytes, r.count, r.type, r.redop, r.root).c_str(),
                row_body(r.out_of_place).c_str(), row_body(r.in_place).c_str(), row_end(r.algorithm).c_str());
    std::fflush(stdout);
    report_.rows.push_back(r);
    return kExitOk;
  }

  // Rank 0: footer (after a complete sweep) and the JSON file (always, errors included).
  void finish(int code) {
    report_.avg_busbw = average_busbw(report_.rows);
    if (code == kExitOk) {
      std::printf("%s", table_footer(report_.wrong_total, report_.avg_busbw, report_.collective).c_str());
      std::fflush(stdout);
    }
    if (o_.json_path.empty()) return;
    FILE* f = std::fopen(o_.json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "collx-bench: cannot write %s: %s\n", o_.json_path.c_str(), std::strerror(errno));
      return;
    }
    const std::string text = report_json(report_, o_);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  const Options& o_;
  collx_algorithm_t algorithm_;
  RankContext ctx_;
  Buffers buffers_;
  Report report_;
};

}  // namespace

int run_rank(const Options& options, collx_algorithm_t algorithm) {
  RankRun run(options, algorithm);
  return run.run();
}

}  // namespace collx_bench
