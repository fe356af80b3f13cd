#include "bench/collx_bench/explain_tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/collx_bench/launcher.h"
#include "bench/collx_bench/sweep.h"

namespace collx_bench {
namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int fail(collx_comm_t comm, const char* what, collx_status_t st) {
  std::fprintf(stderr, "collx-bench: %s failed: %s: %s\n", what, collx_status_name(st), collx_last_error(comm));
  return kExitFailure;
}

// Mean one-way time of `bytes`-byte messages between ranks 0 and 1 (ping-pong / 2).
int one_way_us(collx_comm_t comm, int rank, size_t bytes, int iters, double* out) {
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  const int peer = 1 - rank;
  double start = 0;
  for (int i = -iters / 10 - 1; i < iters; ++i) {  // the first tenth warms up
    if (i == 0) start = now_us();
    collx_status_t st;
    if (rank == 0) {
      if ((st = collx_send(buf.data(), bytes, COLLX_UINT8, peer, 1, comm, nullptr)) != COLLX_OK) return fail(comm, "send", st);
      if ((st = collx_recv(buf.data(), bytes, COLLX_UINT8, peer, 2, comm, nullptr)) != COLLX_OK) return fail(comm, "recv", st);
    } else {
      if ((st = collx_recv(buf.data(), bytes, COLLX_UINT8, peer, 1, comm, nullptr)) != COLLX_OK) return fail(comm, "recv", st);
      if ((st = collx_send(buf.data(), bytes, COLLX_UINT8, peer, 2, comm, nullptr)) != COLLX_OK) return fail(comm, "send", st);
    }
  }
  *out = (now_us() - start) / iters / 2;
  return kExitOk;
}

// Best time of a += b over two float32 arrays of `bytes` each (memory bound when large).
double local_sum_us(size_t bytes) {
  std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 2.0f);
  double best = 1e300;
  for (int rep = 0; rep < 5; ++rep) {
    const double start = now_us();
    float* pa = a.data();
    const float* pb = b.data();
    for (size_t i = 0; i < a.size(); ++i) pa[i] += pb[i];
    best = std::min(best, now_us() - start);
  }
  volatile float sink = a[a.size() / 2];  // keep the loop
  (void)sink;
  return best;
}

// The file with this transport's line replaced (or added); other lines kept.
std::string updated_tune_file(const std::string& path, const std::string& transport, const std::string& line) {
  std::map<std::string, std::string> lines;
  std::ifstream in(path);
  for (std::string raw; std::getline(in, raw);) {
    std::istringstream words(raw);
    std::string first;
    if (!(words >> first) || first[0] == '#') continue;
    lines[first] = raw;
  }
  lines[transport] = line;
  std::string text = "# collx tune file 1\n# transport alpha_us beta_ns_per_byte gamma_ns_per_byte\n";
  for (const auto& entry : lines) text += entry.second + "\n";
  return text;
}

}  // namespace

int explain_sweep(const Options& o, collx_comm_t comm, int rank, int nranks) {
  if (rank != 0) return kExitOk;
  std::string error;
  for (collx_datatype_t dt : o.datatypes) {
    for (uint64_t size : size_sweep(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor, &error)) {
      const RowCounts counts = row_counts(o.coll, size, collx_datatype_size(dt), nranks);
      size_t len = 0;
      collx_explain(comm, bench_coll_kind(o.coll), counts.count, dt, nullptr, &len);  // asks for the size
      std::string text(len, '\0');
      const collx_status_t st = collx_explain(comm, bench_coll_kind(o.coll), counts.count, dt, &text[0], &len);
      if (st != COLLX_OK) return fail(comm, "collx_explain", st);
      std::printf("%s\n", text.c_str());
    }
  }
  return kExitOk;
}

int tune_transport(const Options& o, collx_comm_t comm, int rank, int nranks) {
  if (nranks < 2) {
    if (rank == 0) std::fprintf(stderr, "collx-bench: --tune needs at least 2 ranks\n");
    return kExitUsage;
  }
  const char* transport = "?";
  collx_comm_transport(comm, &transport);
  double alpha = 0, big = 0;
  constexpr size_t kBig = 16u << 20;
  if (rank < 2) {
    if (int code = one_way_us(comm, rank, 8, 2000, &alpha); code != kExitOk) return code;
    if (int code = one_way_us(comm, rank, kBig, 20, &big); code != kExitOk) return code;
  }
  constexpr size_t kArray = 64u << 20;
  const double sum_us = rank == 0 ? local_sum_us(kArray) : 0;
  if (collx_status_t st = collx_barrier(comm, nullptr); st != COLLX_OK) return fail(comm, "barrier", st);
  if (rank != 0) return kExitOk;

  const double beta = std::max(big - alpha, 1e-3) * 1e3 / kBig;  // ns per byte
  const double gamma = sum_us * 1e3 / kArray;                      // ns per byte of one input
  const double memory_gbs = 3.0 * kArray / (sum_us * 1e3);         // two reads and a write
  char line[160];
  std::snprintf(line, sizeof line, "%s %.3f %.4f %.4f", transport, alpha, beta, gamma);
  std::printf("# collx-bench --tune over %s (%d ranks)\n", transport, nranks);
  std::printf("#   alpha %.2f us (8-byte one-way latency)\n", alpha);
  std::printf("#   beta  %.4f ns/byte (%.2f GB/s one way with 16 MiB messages)\n", beta, 1.0 / beta);
  std::printf("#   gamma %.4f ns/byte (float32 a += b over 64 MiB: %.2f GB/s of memory traffic)\n", gamma,
              memory_gbs);
  const std::string text = updated_tune_file(o.tune_path, transport, line);
  std::ofstream out(o.tune_path, std::ios::trunc);
  if (!(out << text) || !out.flush()) {
    std::fprintf(stderr, "collx-bench: --tune: cannot write %s\n", o.tune_path.c_str());
    return kExitFailure;
  }
  std::printf("# wrote %s: use it with COLLX_TUNE_FILE=%s\n", o.tune_path.c_str(), o.tune_path.c_str());
  return kExitOk;
}

}  // namespace collx_bench
