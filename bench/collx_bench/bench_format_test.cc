// Unit tests of collx-bench's library-free parts: argument parsing, the size sweep and
// counts, busbw formulas, the nccl-tests table format, JSON, launcher detection and the
// data patterns / checker (against an independent simulation of each collective).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "bench/collx_bench/args.h"
#include "bench/collx_bench/data.h"
#include "bench/collx_bench/format.h"
#include "bench/collx_bench/json.h"
#include "bench/collx_bench/launch_env.h"
#include "bench/collx_bench/names.h"
#include "bench/collx_bench/sweep.h"

namespace collx_bench {
namespace {

ParseResult parse(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "collx-bench");
  return parse_args(static_cast<int>(args.size()), args.data(), o, err);
}

TEST(Args, ParseSize) {
  uint64_t b = 0;
  EXPECT_TRUE(parse_size("8", &b)); EXPECT_EQ(b, 8u);
  EXPECT_TRUE(parse_size("1K", &b)); EXPECT_EQ(b, 1024u);
  EXPECT_TRUE(parse_size("64m", &b)); EXPECT_EQ(b, 64u << 20);
  EXPECT_TRUE(parse_size("2G", &b)); EXPECT_EQ(b, 2ull << 30);
  EXPECT_TRUE(parse_size("4KiB", &b)); EXPECT_EQ(b, 4096u);
  EXPECT_FALSE(parse_size("", &b));
  EXPECT_FALSE(parse_size("M", &b));
  EXPECT_FALSE(parse_size("1X", &b));
  EXPECT_FALSE(parse_size("-1", &b));
  EXPECT_FALSE(parse_size("99999999999999999999", &b));
  EXPECT_FALSE(parse_size("17179869184G", &b));  // overflows 64 bits
}

TEST(Args, Defaults) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"allreduce"}, &o, &err), ParseResult::kOk) << err;
  EXPECT_EQ(o.coll, BenchColl::kAllreduce);
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 5);
  EXPECT_EQ(o.check_iters, 1);
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.algorithm, "auto");
  EXPECT_EQ(o.transport_mask, 0u);  // auto: the library chooses
  EXPECT_EQ(o.transport, "auto");
  ASSERT_EQ(o.datatypes.size(), 1u);
  EXPECT_EQ(o.datatypes[0], COLLX_FLOAT32);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], COLLX_SUM);
}

TEST(Args, EveryFlagInEveryForm) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"-b", "8", "--maxbytes=1M", "-i4K", "-f", "4", "--iters", "7", "-w", "2", "-c", "0",
                   "-d", "half", "-o", "premulsum", "reduce", "-r", "3", "-t", "tcp", "-a", "ring",
                   "--np", "2", "--json", "out.json", "-T", "30"},
                  &o, &err),
            ParseResult::kOk)
      << err;
  EXPECT_EQ(o.coll, BenchColl::kReduce);
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 1u << 20);
  EXPECT_EQ(o.step_bytes, 4096u);
  EXPECT_EQ(o.step_factor, 4u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 2);
  EXPECT_EQ(o.check_iters, 0);
  EXPECT_EQ(o.datatypes[0], COLLX_FLOAT16);
  EXPECT_EQ(o.ops[0], COLLX_PREMUL_SUM);
  EXPECT_EQ(o.root, 3);
  EXPECT_EQ(o.algorithm, "ring");
  EXPECT_EQ(o.np, 2);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_DOUBLE_EQ(o.timeout_s, 30.0);
  ASSERT_EQ(parse({"--warmup_iters=3", "--datatype", "bf16", "--op=mulsum", "all_reduce_perf"}, &o, &err),
            ParseResult::kOk)
      << err;
  EXPECT_EQ(o.warmup_iters, 3);
  EXPECT_EQ(o.datatypes[0], COLLX_BFLOAT16);
  EXPECT_EQ(o.ops[0], COLLX_PREMUL_SUM);
  EXPECT_EQ(o.coll, BenchColl::kAllreduce);
}

TEST(Args, AliasesAndAll) {
  Options o;
  std::string err;
  const std::map<std::string, collx_datatype_t> types = {
      {"int8", COLLX_INT8},       {"uint8", COLLX_UINT8},       {"int32", COLLX_INT32},
      {"uint32", COLLX_UINT32},   {"int64", COLLX_INT64},       {"uint64", COLLX_UINT64},
      {"half", COLLX_FLOAT16},    {"float16", COLLX_FLOAT16},   {"bfloat16", COLLX_BFLOAT16},
      {"float", COLLX_FLOAT32},   {"float32", COLLX_FLOAT32},   {"double", COLLX_FLOAT64},
      {"float64", COLLX_FLOAT64}, {"FP16", COLLX_FLOAT16}};
  for (const auto& t : types) {
    ASSERT_EQ(parse({"allgather", "-d", t.first.c_str()}, &o, &err), ParseResult::kOk) << t.first;
    EXPECT_EQ(o.datatypes[0], t.second) << t.first;
  }
  ASSERT_EQ(parse({"allreduce", "-d", "all", "-o", "all", "-r", "all"}, &o, &err), ParseResult::kOk);
  EXPECT_EQ(o.datatypes.size(), static_cast<size_t>(COLLX_NUM_DATATYPES));
  EXPECT_EQ(o.ops.size(), static_cast<size_t>(COLLX_NUM_OPS));
  EXPECT_TRUE(o.all_roots);
  const std::map<std::string, BenchColl> colls = {
      {"reducescatter", BenchColl::kReduceScatter}, {"reduce_scatter", BenchColl::kReduceScatter},
      {"all_gather_perf", BenchColl::kAllgather},   {"bcast", BenchColl::kBroadcast},
      {"alltoall", BenchColl::kAlltoall},           {"sendrecv", BenchColl::kSendrecv},
      {"gather_perf", BenchColl::kGather},          {"scatter", BenchColl::kScatter},
      {"all_gatherv", BenchColl::kAllgatherv}};
  for (const auto& c : colls) {
    ASSERT_EQ(parse({c.first.c_str()}, &o, &err), ParseResult::kOk) << c.first;
    EXPECT_EQ(o.coll, c.second);
  }
  for (const char* t : {"shm", "ucx", "nccl"}) {
    EXPECT_EQ(parse({"allreduce", "-t", t}, &o, &err), ParseResult::kOk) << t;
    EXPECT_EQ(o.transport, t);
  }
}

TEST(Args, ErrorsNameTheProblem) {
  Options o;
  std::string err;
  EXPECT_EQ(parse({}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("no collective"), std::string::npos) << err;
  EXPECT_EQ(parse({"allreduce", "-x"}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("unknown option '-x'"), std::string::npos) << err;
  EXPECT_EQ(parse({"allreduce", "--bogus=1"}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_EQ(parse({"allreduce", "-b"}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("needs a value"), std::string::npos) << err;
  EXPECT_EQ(parse({"allreduce", "-d", "float8"}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("float8"), std::string::npos) << err;
  EXPECT_EQ(parse({"allreduce", "-o", "xor"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-n", "0"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-n", "5x"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-t", "rdma"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "--np", "0"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-T", "-1"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-b", "2M", "-e", "1M"}, &o, &err), ParseResult::kError);
  EXPECT_NE(err.find("larger than maxbytes"), std::string::npos) << err;
  EXPECT_EQ(parse({"hypercube"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "broadcast"}, &o, &err), ParseResult::kError);
  EXPECT_EQ(parse({"allreduce", "-h"}, &o, &err), ParseResult::kHelp);
  EXPECT_EQ(parse({"--help"}, &o, &err), ParseResult::kHelp);
}

TEST(Sweep, FactorAndStep) {
  std::string err;
  EXPECT_EQ(size_sweep(8, 1 << 20, 1 << 20, 4, &err),
            (std::vector<uint64_t>{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288}));
  EXPECT_EQ(size_sweep(1 << 20, 4 << 20, 1 << 20, 1, &err),
            (std::vector<uint64_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  EXPECT_EQ(size_sweep(32 << 20, 32 << 20, 1 << 20, 1, &err), (std::vector<uint64_t>{32 << 20}));
  EXPECT_EQ(size_sweep(UINT64_MAX - 1, UINT64_MAX, 4, 1, &err), (std::vector<uint64_t>{UINT64_MAX - 1}));
  EXPECT_TRUE(size_sweep(8, 16, 0, 1, &err).empty());
  EXPECT_TRUE(size_sweep(0, 16, 1, 2, &err).empty());
  EXPECT_TRUE(size_sweep(32, 16, 1, 2, &err).empty());
}

TEST(Sweep, CountsFollowNcclTests) {
  // Allreduce: the whole array.
  RowCounts c = row_counts(BenchColl::kAllreduce, 1 << 20, 4, 4);
  EXPECT_EQ(c.count, 262144u);
  EXPECT_EQ(c.bytes, 1u << 20);
  // Reduce-scatter: per-rank count, total size.
  c = row_counts(BenchColl::kReduceScatter, 1 << 20, 4, 4);
  EXPECT_EQ(c.count, 65536u);
  EXPECT_EQ(c.send_count, 262144u);
  EXPECT_EQ(c.recv_count, 65536u);
  EXPECT_EQ(c.bytes, 1u << 20);
  // Per-rank blocks round down to 16 bytes: 250 floats / 3 ranks = 83 -> 80.
  c = row_counts(BenchColl::kReduceScatter, 1000, 4, 3);
  EXPECT_EQ(c.count, 80u);
  EXPECT_EQ(c.bytes, 960u);
  c = row_counts(BenchColl::kAllgather, 1000, 8, 3);  // 125 / 3 = 41 -> 40 doubles
  EXPECT_EQ(c.count, 40u);
  EXPECT_EQ(c.send_count, 40u);
  EXPECT_EQ(c.recv_count, 120u);
  EXPECT_EQ(c.bytes, 960u);
  c = row_counts(BenchColl::kAlltoall, 1000, 1, 3);  // 333 -> 320 int8
  EXPECT_EQ(c.count, 320u);
  EXPECT_EQ(c.bytes, 960u);
  c = row_counts(BenchColl::kGather, 1000, 8, 3);  // the root's recvbuf: 3 blocks of 40 doubles
  EXPECT_EQ(c.count, 40u);
  EXPECT_EQ(c.send_count, 40u);
  EXPECT_EQ(c.recv_count, 120u);
  EXPECT_EQ(c.bytes, 960u);
  c = row_counts(BenchColl::kScatter, 1000, 8, 3);  // the root's sendbuf: 3 blocks of 40 doubles
  EXPECT_EQ(c.count, 40u);
  EXPECT_EQ(c.send_count, 120u);
  EXPECT_EQ(c.recv_count, 40u);
  EXPECT_EQ(c.bytes, 960u);
  c = row_counts(BenchColl::kAllgatherv, 1000, 8, 4);  // 125 / (1+2+3+1) units = 17 -> 16 doubles
  EXPECT_EQ(c.count, 16u);
  EXPECT_EQ(c.send_count, 48u);
  EXPECT_EQ(c.recv_count, 112u);
  EXPECT_EQ(c.bytes, 896u);
  c = row_counts(BenchColl::kAllgather, 8, 4, 4);  // too small: an empty row
  EXPECT_EQ(c.count, 0u);
  EXPECT_EQ(c.bytes, 0u);
  c = row_counts(BenchColl::kBroadcast, 10, 4, 4);  // 2 floats
  EXPECT_EQ(c.count, 2u);
  EXPECT_EQ(c.bytes, 8u);
  c = row_counts(BenchColl::kSendrecv, 4096, 2, 4);
  EXPECT_EQ(c.count, 2048u);
}

TEST(Sweep, BusBandwidth) {
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kAllreduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kAllgather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kAlltoall, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kAllgatherv, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(BenchColl::kSendrecv, 4), 1.0);
  EXPECT_DOUBLE_EQ(algbw_gbs(1000000000, 1e6), 1.0);       // 1 GB in 1 s
  EXPECT_NEAR(algbw_gbs(134217728, 655.30), 204.82, 0.01);  // the reference's example row
  EXPECT_DOUBLE_EQ(algbw_gbs(100, 0.0), 0.0);
}

TEST(Format, FloatStrMatchesGetFloatStr) {
  EXPECT_EQ(float_str(24.10, 7), "  24.10");
  EXPECT_EQ(float_str(655.30, 7), " 655.30");
  EXPECT_EQ(float_str(9999.994, 7), "9999.99");
  EXPECT_EQ(float_str(12345.6, 7), "12345.6");
  EXPECT_EQ(float_str(123456.7, 7), " 123457");
  EXPECT_EQ(float_str(1234567.0, 7), "1234567");
  EXPECT_EQ(float_str(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(float_str(0.0, 6), "  0.00");
  EXPECT_EQ(float_str(204.82, 6), "204.82");
  EXPECT_EQ(float_str(1234.5, 6), "1234.5");
  EXPECT_EQ(float_str(12345.0, 6), " 12345");
  EXPECT_EQ(float_str(1234567.0, 6), " 1e+06");
}

TEST(Format, HeaderRowsAndFooterAreNcclTests) {
  const std::string header = table_header();
  const std::string expected =
      "#\n"
      "#                                                              out-of-place                       in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong  algorithm\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n";
  EXPECT_EQ(header, expected);

  Cell c;
  c.measured = true;
  c.time_us = 24.10;
  c.checked = true;
  EXPECT_EQ(row_preamble(8, 2, "float", "sum", -1) + row_body(c) + row_body(c) + row_end("ring"),
            "           8             2     float     sum      -1    24.10    0.00    0.00       0    24.10    0.00    0.00       0  ring\n");
  c.checked = false;
  EXPECT_EQ(row_body(c), "    24.10    0.00    0.00    N/A");
  Cell none;
  EXPECT_EQ(row_body(none), "      N/A     N/A     N/A     N/A");

  EXPECT_EQ(table_footer(0, 180.123, "allreduce"),
            "# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 180.123 \n"
            "#\n"
            "# Collective test concluded: allreduce\n");
  EXPECT_NE(table_footer(3, 1.0, "allreduce").find("# Out of bounds values : 3 FAILED\n"), std::string::npos);
}

TEST(Json, ShapeAndEscaping) {
  EXPECT_EQ(json_escape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
  Report r;
  r.version = "0.1.0";
  r.library_version = "0.1.0";
  r.collective = "allreduce";
  r.nranks = 2;
  r.ranks.push_back(RankInfo{0, 123, 0, "host\"x"});
  RowResult row;
  row.bytes = 1024;
  row.count = 256;
  row.type = "float";
  row.redop = "sum";
  row.algorithm = "ring";
  row.out_of_place.measured = true;
  row.out_of_place.time_us = 10;
  row.out_of_place.algbw = 2;
  row.out_of_place.busbw = 3;
  row.out_of_place.checked = true;
  row.in_place.measured = true;
  row.in_place.busbw = 5;
  r.rows.push_back(row);
  r.avg_busbw = average_busbw(r.rows);
  EXPECT_DOUBLE_EQ(r.avg_busbw, 4.0);
  Options o;
  const std::string j = report_json(r, o);
  for (const char* needle :
       {"\"config\": {", "\"ranks\": [{\"rank\": 0, \"pid\": 123, \"host\": \"host\\\"x\", \"local_rank\": 0}]",
        "\"results\": [{\"size\": 1024, \"count\": 256, \"type\": \"float\", \"redop\": \"sum\", \"root\": -1, "
        "\"algorithm\": \"ring\", \"out_of_place\": {\"time_us\": 10, \"algbw\": 2, \"busbw\": 3, \"wrong\": 0}, "
        "\"in_place\": {\"time_us\": 0, \"algbw\": 0, \"busbw\": 5, \"wrong\": null}}]",
        "\"avg_busbw\": 4", "\"errors\": []"}) {
    EXPECT_NE(j.find(needle), std::string::npos) << needle << "\n" << j;
  }
}

TEST(LaunchEnv, Detection) {
  std::map<std::string, std::string> vars;
  EnvFn env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(detect_launcher(env), "");
  vars["SLURM_PROCID"] = "0";
  vars["SLURM_NTASKS"] = "1";
  EXPECT_EQ(detect_launcher(env), "");  // a lone srun task still spawns local ranks
  vars["SLURM_NTASKS"] = "4";
  EXPECT_EQ(detect_launcher(env), "SLURM_PROCID");
  vars.clear();
  vars["OMPI_COMM_WORLD_RANK"] = "1";
  vars["OMPI_COMM_WORLD_SIZE"] = "2";
  EXPECT_EQ(detect_launcher(env), "OMPI_COMM_WORLD_RANK");
  int rank = -1, size = -1;
  bool found = false;
  std::string err;
  EXPECT_FALSE(launcher_rank(env, &rank, &size, &found, &err));  // no COLLX_STORE_ADDR
  EXPECT_TRUE(found);
  EXPECT_NE(err.find("COLLX_STORE_ADDR"), std::string::npos);
  vars["COLLX_STORE_ADDR"] = "node0:29500";
  EXPECT_TRUE(launcher_rank(env, &rank, &size, &found, &err)) << err;
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 2);
  vars["COLLX_RANK"] = "0";  // collx's own variables win and are read by the library
  EXPECT_EQ(detect_launcher(env), "COLLX_RANK");
  EXPECT_FALSE(launcher_rank(env, &rank, &size, &found, &err));
  EXPECT_FALSE(found);
  vars.clear();
  vars["PMI_RANK"] = "x";
  vars["PMI_SIZE"] = "2";
  vars["COLLX_STORE_ADDR"] = "a:1";
  EXPECT_FALSE(launcher_rank(env, &rank, &size, &found, &err));
  EXPECT_TRUE(found);
}

TEST(Data, ElementConversions) {
  for (int t = 0; t < COLLX_NUM_DATATYPES; ++t) {
    const auto dt = static_cast<collx_datatype_t>(t);
    for (double v : {0.0, 1.0, 2.0, 3.0, 6.0, 29.0, 111.0}) EXPECT_EQ(round_to_type(dt, v), v) << t;
    if (datatype_is_signed(dt)) {
      EXPECT_EQ(round_to_type(dt, -1.0), -1.0) << t;
    }
  }
  EXPECT_EQ(round_to_type(COLLX_UINT8, 257.0), 1.0);   // wraps like a store of the low bits
  EXPECT_EQ(round_to_type(COLLX_INT8, 130.0), -126.0);
  EXPECT_EQ(round_to_type(COLLX_FLOAT16, 65504.0), 65504.0);
  EXPECT_EQ(round_to_type(COLLX_FLOAT16, 2049.0), 2048.0);  // tie to even
  EXPECT_EQ(round_to_type(COLLX_FLOAT16, 2051.0), 2052.0);
  EXPECT_TRUE(std::isinf(round_to_type(COLLX_FLOAT16, 1e6)));
  EXPECT_EQ(round_to_type(COLLX_FLOAT16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // subnormal
  EXPECT_EQ(round_to_type(COLLX_BFLOAT16, 257.0), 256.0);  // tie to even
  EXPECT_EQ(round_to_type(COLLX_BFLOAT16, 259.0), 260.0);
  EXPECT_NEAR(round_to_type(COLLX_FLOAT16, 1.0 / 3), 1.0 / 3, 1e-3);
}

// --- The checker against an independent simulation of every collective -----------------

double combine(collx_op_t op, double a, double b) {
  switch (op) {
    case COLLX_PROD: return a * b;
    case COLLX_MIN: return std::min(a, b);
    case COLLX_MAX: return std::max(a, b);
    default: return a + b;
  }
}

// Every rank's outputs, computed from the inputs fill_* wrote (not from the pattern).
struct World {
  std::vector<std::vector<unsigned char>> send, recv;
};

World simulate(const CallShape& base, bool in_place) {
  const int n = base.nranks;
  const size_t elt = datatype_bytes(base.datatype);
  // Room for every rank's block (allgatherv's uneven shards take up to 2n blocks).
  const size_t big = base.count * std::max({static_cast<size_t>(n), allgatherv_units(n), alltoallv_max_units(n)}) + 1;
  World w;
  w.send.assign(n, std::vector<unsigned char>(big * elt));
  w.recv.assign(n, std::vector<unsigned char>(big * elt));
  std::vector<CallShape> shapes(n, base);
  for (int r = 0; r < n; ++r) {
    shapes[r].rank = r;
    if (in_place) fill_in_place(shapes[r], w.recv[r].data());
    else fill_out_of_place(shapes[r], w.send[r].data(), w.recv[r].data());
  }
  // The input each rank provides, as a view of its buffers (NCCL/collx in-place rules).
  auto input = [&](int r, size_t i) {
    const collx_datatype_t t = base.datatype;
    if (!in_place) return load_element(t, w.send[r].data(), i);
    if (base.coll == BenchColl::kAllgather) return load_element(t, w.recv[r].data(), r * base.count + i);
    return load_element(t, w.recv[r].data(), i);
  };
  const collx_datatype_t t = base.datatype;
  const size_t c = base.count;
  std::vector<std::vector<double>> out(n);
  for (int r = 0; r < n; ++r) {
    switch (base.coll) {
      case BenchColl::kAllreduce:
      case BenchColl::kReduce:
      case BenchColl::kReduceScatter:
      case BenchColl::kReduceScatterv: {
        const bool v = base.coll == BenchColl::kReduceScatterv;
        const size_t offset = v ? shard_offset(c, r) : base.coll == BenchColl::kReduceScatter ? r * c : 0;
        for (size_t i = 0; i < (v ? allgatherv_shard(c, r) : c); ++i) {
          double acc = 0;
          for (int q = 0; q < n; ++q) {
            double v = input(q, offset + i);
            if (base.op == COLLX_PREMUL_SUM) v = round_to_type(t, kPremulScalar * v);
            acc = q == 0 ? v : combine(base.op, acc, v);
          }
          if (base.op == COLLX_AVG) acc = datatype_is_float(t) ? acc / n : std::trunc(acc / n);
          out[r].push_back(acc);
        }
        break;
      }
      case BenchColl::kAllgather:
        for (int q = 0; q < n; ++q) for (size_t i = 0; i < c; ++i) out[r].push_back(input(q, i));
        break;
      case BenchColl::kBroadcast:
        for (size_t i = 0; i < c; ++i) out[r].push_back(input(base.root, i));
        break;
      case BenchColl::kAlltoall:
        for (int q = 0; q < n; ++q) for (size_t i = 0; i < c; ++i) out[r].push_back(input(q, r * c + i));
        break;
      case BenchColl::kGather:
        if (r == base.root)
          for (int q = 0; q < n; ++q) for (size_t i = 0; i < c; ++i) out[r].push_back(input(q, i));
        break;
      case BenchColl::kScatter:
        for (size_t i = 0; i < c; ++i) out[r].push_back(input(base.root, r * c + i));
        break;
      case BenchColl::kAllgatherv:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < allgatherv_shard(c, q); ++i) out[r].push_back(input(q, i));
        break;
      case BenchColl::kAlltoallv:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < alltoallv_block(c, q, r); ++i) out[r].push_back(input(q, alltoallv_send_offset(c, q, r) + i));
        break;
      case BenchColl::kGatherv:
        if (r == base.root)
          for (int q = 0; q < n; ++q) for (size_t i = 0; i < allgatherv_shard(c, q); ++i) out[r].push_back(input(q, i));
        break;
      case BenchColl::kScatterv:
        for (size_t i = 0; i < allgatherv_shard(c, r); ++i) out[r].push_back(input(base.root, shard_offset(c, r) + i));
        break;
      case BenchColl::kSendrecv:
        for (size_t i = 0; i < c; ++i) out[r].push_back(input((r + n - 1) % n, i));
        break;
    }
  }
  for (int r = 0; r < n; ++r) {
    if ((base.coll == BenchColl::kReduce || base.coll == BenchColl::kGather || base.coll == BenchColl::kGatherv) &&
        r != base.root) {
      continue;
    }
    size_t offset = in_place && base.coll == BenchColl::kReduceScatter ? r * c : 0;
    if (in_place && base.coll == BenchColl::kReduceScatterv) offset = shard_offset(c, r);
    for (size_t i = 0; i < out[r].size(); ++i) store_element(t, w.recv[r].data(), offset + i, out[r][i]);
  }
  return w;
}

TEST(Data, CheckerAcceptsCorrectResultsAndCountsWrongOnes) {
  const BenchColl colls[] = {BenchColl::kAllreduce, BenchColl::kReduceScatter, BenchColl::kAllgather,
                             BenchColl::kBroadcast, BenchColl::kReduce,        BenchColl::kAlltoall,
                             BenchColl::kGather,    BenchColl::kScatter,       BenchColl::kAllgatherv,
                             BenchColl::kAlltoallv, BenchColl::kReduceScatterv, BenchColl::kGatherv,
                             BenchColl::kScatterv,  BenchColl::kSendrecv};
  for (BenchColl coll : colls) {
    for (int n : {1, 2, 3, 5}) {
      for (int t = 0; t < COLLX_NUM_DATATYPES; ++t) {
        for (int op = 0; op < (bench_coll_reduces(coll) ? COLLX_NUM_OPS : 1); ++op) {
          for (bool in_place : {false, true}) {
            if (in_place && !bench_coll_has_in_place(coll)) continue;
            CallShape s;
            s.coll = coll;
            s.datatype = static_cast<collx_datatype_t>(t);
            s.op = static_cast<collx_op_t>(op);
            s.nranks = n;
            s.root = n - 1;
            s.count = 37;
            World w = simulate(s, in_place);
            const std::string where = std::string(bench_coll_name(coll)) + " n=" + std::to_string(n) + " " +
                                      datatype_display_name(s.datatype) + " " + op_display_name(s.op) +
                                      (in_place ? " in-place" : " out-of-place");
            for (int r = 0; r < n; ++r) {
              CallShape mine = s;
              mine.rank = r;
              auto wrong = [&]() {
                return in_place ? count_wrong_in_place(mine, w.recv[r].data())
                                : count_wrong_out_of_place(mine, w.recv[r].data());
              };
              ASSERT_EQ(wrong(), 0) << where << " rank " << r;
              if ((coll == BenchColl::kReduce || coll == BenchColl::kGather || coll == BenchColl::kGatherv) &&
                  r != s.root) {
                continue;
              }
              // Corrupt one output element: the checker must see exactly one wrong.
              size_t at = (in_place && coll == BenchColl::kReduceScatter ? r * s.count : 0) + 5;
              if (in_place && coll == BenchColl::kReduceScatterv) at += shard_offset(s.count, r);
              store_element(s.datatype, w.recv[r].data(), at, kPoison);
              ASSERT_EQ(wrong(), 1) << where << " rank " << r;
            }
          }
        }
      }
    }
  }
}

TEST(Data, StaleOutputsAreCaught) {
  // The poison written before a call is never a valid result.
  for (BenchColl coll : {BenchColl::kAllreduce, BenchColl::kAllgather, BenchColl::kSendrecv}) {
    CallShape s;
    s.coll = coll;
    s.nranks = 3;
    s.rank = 1;
    s.count = 16;
    std::vector<float> send(64), recv(64);
    fill_out_of_place(s, send.data(), recv.data());
    const int64_t outputs = coll == BenchColl::kAllgather ? 48 : 16;
    EXPECT_EQ(count_wrong_out_of_place(s, recv.data()), outputs) << bench_coll_name(coll);
  }
}

TEST(Data, PatternsDistinguishRanks) {
  CallShape s;
  s.coll = BenchColl::kAllgather;
  s.nranks = 8;
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      bool differ = false;
      for (size_t i = 0; i < 29 && !differ; ++i) differ = input_value(s, a, i) != input_value(s, b, i);
      EXPECT_TRUE(differ) << a << " vs " << b;
    }
  }
}

}  // namespace
}  // namespace collx_bench
