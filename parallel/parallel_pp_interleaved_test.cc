// Interleaved 1F1B (virtual pipeline stages): Megatron's order of computes, transfers that
// match in order and cannot deadlock (checked by a rendezvous simulation of every stage),
// and a real pipeline over thread ranks whose outputs and gradients equal running the
// model's virtual stages one after the other.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::PerRank;
using collx::testing::ThreadRanks;

std::vector<collx_pp_step_t> steps_of(int p, int r, int v, int m) {
  size_t n = 0;
  EXPECT_EQ(collx_pp_schedule_interleaved(p, r, v, m, nullptr, 0, &n), COLLX_OK) << collx_last_error(nullptr);
  std::vector<collx_pp_step_t> s(n);
  EXPECT_EQ(collx_pp_schedule_interleaved(p, r, v, m, s.data(), s.size(), &n), COLLX_OK);
  return s;
}

// "F<chunk>.<microbatch>" / "B<chunk>.<microbatch>" for each compute, space-separated.
std::string computes(const std::vector<collx_pp_step_t>& steps) {
  std::ostringstream o;
  for (const collx_pp_step_t& s : steps)
    if (s.kind != COLLX_PP_EXCHANGE_ONLY)
      o << (s.kind == COLLX_PP_FORWARD ? "F" : "B") << s.chunk << "." << s.microbatch << " ";
  return o.str();
}

// pp 2, 2 chunks, 4 micro-batches, worked out by hand from Megatron's rules: forward k runs
// chunk (k mod 4) / 2 on micro-batch (k / 4) * 2 + k mod 2; backward k the other chunk;
// warm-up (2 - r - 1) * 2 + (2 - 1) * 2 = 4 on stage 0, 2 on stage 1.
TEST(ParallelPpInterleaved, ComputesFollowMegatronOrder) {
  EXPECT_EQ(computes(steps_of(2, 0, 2, 4)),
            "F0.0 F0.1 F1.0 F1.1 "                      // warm-up
            "F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 "  // one forward, one backward
            "B1.2 B1.3 B0.2 B0.3 ");                    // cool-down
  EXPECT_EQ(computes(steps_of(2, 1, 2, 4)),
            "F0.0 F0.1 "
            "F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 "
            "B0.2 B0.3 ");
  // microbatches == pp_size: every forward first (Megatron's all-warm-up case).
  EXPECT_EQ(computes(steps_of(2, 1, 2, 2)), "F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1 ");
}

int megatron_warmup(int p, int r, int v, int m) {
  if (m == p) return m * v;
  return std::min((p - r - 1) * 2 + (v - 1) * p, m * v);
}

TEST(ParallelPpInterleaved, ShapeForManySizes) {
  for (int p : {2, 3, 4})
    for (int v : {1, 2, 3})
      for (int m : {p, 2 * p, 3 * p})
        for (int r = 0; r < p; ++r) {
          SCOPED_TRACE("pp " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m) + " rank " +
                       std::to_string(r));
          std::vector<collx_pp_step_t> steps = steps_of(p, r, v, m);
          std::vector<int> fwd(v, 0), bwd(v, 0), lasts(v, 0);
          int forwards_before_first_backward = -1, forwards = 0;
          for (const collx_pp_step_t& s : steps) {
            if (s.kind == COLLX_PP_EXCHANGE_ONLY) continue;
            ASSERT_TRUE(s.chunk >= 0 && s.chunk < v);
            if (s.kind == COLLX_PP_FORWARD) {
              EXPECT_EQ(s.microbatch, fwd[s.chunk]++) << "forwards of a chunk run in micro-batch order";
              ++forwards;
            } else {
              if (forwards_before_first_backward < 0) forwards_before_first_backward = forwards;
              EXPECT_EQ(s.microbatch, bwd[s.chunk]++) << "backwards of a chunk run in micro-batch order";
              EXPECT_LT(s.microbatch, fwd[s.chunk]) << "backward before its forward";
              EXPECT_EQ(s.last_backward, s.microbatch == m - 1 ? 1 : 0);
              lasts[s.chunk] += s.last_backward;
            }
          }
          for (int c = 0; c < v; ++c) {
            EXPECT_EQ(fwd[c], m);
            EXPECT_EQ(bwd[c], m);
            EXPECT_EQ(lasts[c], 1);
          }
          const int w = megatron_warmup(p, r, v, m);
          // Steady state starts with a forward, so one more forward precedes the first backward.
          EXPECT_EQ(forwards_before_first_backward, w == m * v ? w : w + 1);
        }
}

TEST(ParallelPpInterleaved, RejectsWhatMegatronRejects) {
  size_t n = 0;
  EXPECT_EQ(collx_pp_schedule_interleaved(4, 0, 2, 6, nullptr, 0, &n), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("microbatches 6 is not a multiple of pp_size 4"),
            std::string::npos)
      << collx_last_error(nullptr);
  EXPECT_EQ(collx_pp_schedule_interleaved(1, 0, 2, 2, nullptr, 0, &n), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("pp_size 1"), std::string::npos);
  EXPECT_EQ(collx_pp_schedule_interleaved(2, 2, 2, 2, nullptr, 0, &n), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("pp_rank 2"), std::string::npos);
  EXPECT_EQ(collx_pp_schedule_interleaved(2, 0, 0, 2, nullptr, 0, &n), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("virtual_stages 0"), std::string::npos);
  EXPECT_EQ(collx_pp_schedule_interleaved(2, 0, 2, 2, nullptr, 0, nullptr), COLLX_ERR_INVALID_ARG);
}

// ---- Every stage's transfers together: matched in order, never blocked forever ----------

enum Stream { kAct = 0, kGrad = 1 };

struct Op {
  int stream;  // kAct: from rank to rank+1; kGrad: from rank to rank-1 (ring)
  int src;     // the sending rank (names the directed stream with `stream`)
  bool send;
  int seq;  // position in its stream
  collx_pp_ref_t ref;
};

// Simulates all stages with rendezvous transfers (a send completes only once its receive is
// posted and vice versa), each stage posting one step's exchange at a time and moving on
// when all of it completed. Returns "" or what went wrong.
std::string simulate(int p, int v, int m) {
  std::vector<std::vector<collx_pp_step_t>> steps(p);
  std::vector<std::vector<std::vector<Op>>> ops(p);  // [rank][step] -> ops
  // count[stream][src][send?] -> next seq
  std::vector<int> count(2 * p * 2, 0);
  // where[stream][src][send?][seq] = step index on the rank that does it
  std::vector<std::vector<int>> where(2 * p * 2);
  std::vector<std::vector<collx_pp_ref_t>> labels(2 * p * 2);
  auto key = [&](int stream, int src, bool send) { return (stream * p + src) * 2 + (send ? 1 : 0); };
  for (int r = 0; r < p; ++r) {
    steps[r] = steps_of(p, r, v, m);
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    ops[r].resize(steps[r].size());
    for (size_t i = 0; i < steps[r].size(); ++i) {
      const collx_pp_step_t& s = steps[r][i];
      auto add = [&](int stream, int src, bool send, collx_pp_ref_t ref) {
        if (ref.microbatch < 0) return;
        const int k = key(stream, src, send);
        ops[r][i].push_back({stream, src, send, count[k]++, ref});
        where[k].push_back(static_cast<int>(i));
        labels[k].push_back(ref);
      };
      add(kAct, r, true, s.send_next);
      add(kAct, prev, false, s.recv_prev);
      add(kGrad, r, true, s.send_prev);
      add(kGrad, next, false, s.recv_next);
    }
  }
  // Matching in order, and the right tensor: chunk c's output on the last stage is chunk
  // c+1's input on the first; chunk c's input gradient on the first stage is chunk c-1's
  // output gradient on the last.
  for (int stream : {kAct, kGrad})
    for (int src = 0; src < p; ++src) {
      const auto& sends = labels[key(stream, src, true)];
      const auto& recvs = labels[key(stream, src, false)];
      if (sends.size() != recvs.size())
        return "stream " + std::to_string(stream) + " from rank " + std::to_string(src) + ": " +
               std::to_string(sends.size()) + " sends, " + std::to_string(recvs.size()) + " receives";
      for (size_t i = 0; i < sends.size(); ++i) {
        int chunk = sends[i].chunk;
        if (stream == kAct && src == p - 1) ++chunk;
        if (stream == kGrad && src == 0) --chunk;
        if (recvs[i].microbatch != sends[i].microbatch || recvs[i].chunk != chunk)
          return "stream " + std::to_string(stream) + " from rank " + std::to_string(src) + " message " +
                 std::to_string(i) + ": sent (" + std::to_string(sends[i].microbatch) + ", " +
                 std::to_string(sends[i].chunk) + "), received as (" + std::to_string(recvs[i].microbatch) + ", " +
                 std::to_string(recvs[i].chunk) + ")";
      }
    }
  // Data dependencies on each stage: inputs received no later than the step that computes,
  // outputs sent after the step that produced them.
  for (int r = 0; r < p; ++r) {
    std::vector<std::vector<int>> fwd_at(v, std::vector<int>(m, -1)), bwd_at = fwd_at, in_at = fwd_at, gout_at = fwd_at;
    for (size_t i = 0; i < steps[r].size(); ++i) {
      const collx_pp_step_t& s = steps[r][i];
      const int at = static_cast<int>(i);
      if (s.recv_prev.microbatch >= 0) in_at[s.recv_prev.chunk][s.recv_prev.microbatch] = at;
      if (s.recv_next.microbatch >= 0) gout_at[s.recv_next.chunk][s.recv_next.microbatch] = at;
      if (s.send_next.microbatch >= 0 && fwd_at[s.send_next.chunk][s.send_next.microbatch] < 0)
        return "rank " + std::to_string(r) + " sends an output before computing it";
      if (s.send_prev.microbatch >= 0 && bwd_at[s.send_prev.chunk][s.send_prev.microbatch] < 0)
        return "rank " + std::to_string(r) + " sends an input gradient before computing it";
      if (s.kind == COLLX_PP_FORWARD) {
        if (!(r == 0 && s.chunk == 0) && in_at[s.chunk][s.microbatch] < 0)
          return "rank " + std::to_string(r) + " runs a forward before receiving its input";
        fwd_at[s.chunk][s.microbatch] = at;
      } else if (s.kind == COLLX_PP_BACKWARD) {
        if (!(r == p - 1 && s.chunk == v - 1) && gout_at[s.chunk][s.microbatch] < 0)
          return "rank " + std::to_string(r) + " runs a backward before receiving its output gradient";
        bwd_at[s.chunk][s.microbatch] = at;
      }
    }
  }
  // Rendezvous: an op completes when the peer has posted its counterpart (reached that step).
  std::vector<size_t> at(p, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      if (at[r] == steps[r].size()) continue;
      bool done = true;
      for (const Op& op : ops[r][at[r]]) {
        const int peer = op.send ? (op.stream == kAct ? (r + 1) % p : (r + p - 1) % p) : op.src;
        if (static_cast<int>(at[peer]) < where[key(op.stream, op.src, !op.send)][op.seq]) done = false;
      }
      if (done) {
        ++at[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < p; ++r)
    if (at[r] != steps[r].size())
      return "deadlock: rank " + std::to_string(r) + " stuck at step " + std::to_string(at[r]) + " of " +
             std::to_string(steps[r].size());
  return "";
}

TEST(ParallelPpInterleaved, TransfersMatchInOrderAndCannotDeadlock) {
  for (int p : {2, 3, 4, 5, 8})
    for (int v : {1, 2, 3, 4, 6})
      for (int m : {p, 2 * p, 3 * p, 4 * p}) {
        EXPECT_EQ(simulate(p, v, m), "") << "pp " << p << " v " << v << " m " << m;
      }
}

// ---- A real pipeline on thread ranks against the sequential model ---------------------

constexpr size_t kLen = 3;

// Virtual stage s: y = a_s * x + b_s per element; loss = sum(y^2) / 2 over the last output.
double a_of(int s) { return 0.75 + 0.125 * s; }
double b_of(int s) { return 0.5 - 0.25 * s; }
double input(int mb, size_t j) { return 0.25 * mb - 0.5 + 0.125 * static_cast<double>(j); }

struct Result {
  std::vector<double> da, db;               // per virtual stage
  std::vector<std::vector<double>> output;  // per micro-batch, the model's output
};

Result sequential(int stages, int m) {
  Result res{std::vector<double>(stages, 0.0), std::vector<double>(stages, 0.0), {}};
  for (int mb = 0; mb < m; ++mb) {
    std::vector<std::vector<double>> x(stages + 1, std::vector<double>(kLen));
    for (size_t j = 0; j < kLen; ++j) x[0][j] = input(mb, j);
    for (int s = 0; s < stages; ++s)
      for (size_t j = 0; j < kLen; ++j) x[s + 1][j] = a_of(s) * x[s][j] + b_of(s);
    res.output.push_back(x[stages]);
    std::vector<double> g = x[stages];
    for (int s = stages - 1; s >= 0; --s) {
      for (size_t j = 0; j < kLen; ++j) res.da[s] += x[s][j] * g[j];
      for (size_t j = 0; j < kLen; ++j) res.db[s] += g[j];
      for (size_t j = 0; j < kLen; ++j) g[j] *= a_of(s);
    }
  }
  return res;
}

// Runs stage r's steps; fills da/db of its virtual stages (chunk c is c * p + r) and, on
// the last stage, the outputs.
void run_stage(collx_comm_t comm, int p, int r, int v, int m, Result* res) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using Bufs = std::vector<std::vector<std::vector<double>>>;  // [chunk][microbatch][j]
  Bufs x_in(v, std::vector<std::vector<double>>(m, std::vector<double>(kLen, nan)));
  Bufs y = x_in, g_out = x_in, g_in = x_in;
  auto buf = [](Bufs& b, const collx_pp_ref_t& ref) {
    return ref.microbatch < 0 ? nullptr : b[ref.chunk][ref.microbatch].data();
  };
  const int last_stage = p * v - 1;
  res->output.assign(m, {});
  for (const collx_pp_step_t& s : steps_of(p, r, v, m)) {
    double* send_next = buf(y, s.send_next);
    double* recv_prev = buf(x_in, s.recv_prev);
    double* send_prev = buf(g_in, s.send_prev);
    double* recv_next = buf(g_out, s.recv_next);
    if (send_next || recv_prev || send_prev || recv_next) {
      ASSERT_EQ(collx_pp_exchange_ring(send_next, recv_prev, send_prev, recv_next, kLen, COLLX_FLOAT64, 0, comm, 20000),
                COLLX_OK)
          << collx_last_error(nullptr);
    }
    if (s.kind == COLLX_PP_EXCHANGE_ONLY) continue;
    const int c = s.chunk, mb = s.microbatch, vs = c * p + r;
    std::vector<double>& x = x_in[c][mb];
    if (s.kind == COLLX_PP_FORWARD) {
      for (size_t j = 0; j < kLen; ++j) {
        if (vs == 0) x[j] = input(mb, j);
        y[c][mb][j] = a_of(vs) * x[j] + b_of(vs);
      }
      if (vs == last_stage) {
        g_out[c][mb] = y[c][mb];
        res->output[mb] = y[c][mb];
      }
    } else {
      const std::vector<double>& g = g_out[c][mb];
      for (size_t j = 0; j < kLen; ++j) res->da[vs] += x[j] * g[j];
      for (size_t j = 0; j < kLen; ++j) res->db[vs] += g[j];
      for (size_t j = 0; j < kLen; ++j) g_in[c][mb][j] = a_of(vs) * g[j];
    }
  }
}

TEST(ParallelPpInterleaved, PipelineEqualsSequentialVirtualStages) {
  struct Case {
    int p, v, m;
    uint32_t transports;  // 0: the default choice
  };
  for (Case c :
       {Case{2, 2, 2, 0}, Case{2, 3, 4, 0}, Case{3, 2, 6, 0}, Case{4, 2, 4, 0}, Case{4, 3, 8, 0}, Case{3, 1, 3, 0},
        Case{2, 2, 4, COLLX_TRANSPORT_TCP}, Case{4, 2, 8, COLLX_TRANSPORT_TCP}, Case{4, 2, 8, COLLX_TRANSPORT_SHM}}) {
    SCOPED_TRACE("pp " + std::to_string(c.p) + " v " + std::to_string(c.v) + " m " + std::to_string(c.m) +
                 " transports " + std::to_string(c.transports));
    ThreadRanks ranks(c.p, 20000, c.transports);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const int stages = c.p * c.v;
    PerRank<Result> got(c.p);
    ranks.run([&](int rank, collx_comm_t comm) {
      Result res{std::vector<double>(stages, 0.0), std::vector<double>(stages, 0.0), {}};
      run_stage(comm, c.p, rank, c.v, c.m, &res);
      got.set(rank, res);
    });
    const Result want = sequential(stages, c.m);
    // Same operations in the same order (each chunk's backwards in micro-batch order): bit
    // for bit.
    for (int s = 0; s < stages; ++s) {
      const int owner = s % c.p;
      EXPECT_EQ(got[owner].da[s], want.da[s]) << "virtual stage " << s;
      EXPECT_EQ(got[owner].db[s], want.db[s]) << "virtual stage " << s;
    }
    for (int mb = 0; mb < c.m; ++mb) EXPECT_EQ(got[c.p - 1].output[mb], want.output[mb]) << "micro-batch " << mb;
  }
}

TEST(ParallelPpInterleaved, RingExchangeWrapsAround) {
  ThreadRanks ranks(3, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<double>> got(3);
  ranks.run([&](int rank, collx_comm_t comm) {
    double out_next = 10.0 + rank, out_prev = 20.0 + rank, from_prev = -1, from_next = -1;
    EXPECT_EQ(collx_pp_exchange_ring(&out_next, &from_prev, &out_prev, &from_next, 1, COLLX_FLOAT64, 3, comm, 20000),
              COLLX_OK)
        << collx_last_error(nullptr);
    got.set(rank, {from_prev, from_next});
    EXPECT_EQ(collx_pp_exchange_ring(nullptr, nullptr, nullptr, nullptr, 1, COLLX_FLOAT64, 1 << 30, comm, 1000),
              COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("< 2^30"), std::string::npos);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(got[r][0], 10.0 + (r + 2) % 3) << "rank " << r << " receives the previous stage's activation";
    EXPECT_EQ(got[r][1], 20.0 + (r + 1) % 3) << "rank " << r << " receives the next stage's gradient";
  }
}

}  // namespace
