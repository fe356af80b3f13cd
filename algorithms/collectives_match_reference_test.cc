// Every algorithm against a reference computed in double, over world sizes (1, primes,
// non-powers of two), counts (0, smaller than the world, odd, large), every datatype, every
// op, in place and out of place, chunk sizes that force many chunks, and both send modes of
// the in-process transport (eager and rendezvous). Inputs are small integers so the
// reference is exact in every datatype and the comparison is exact.
//
// Each case also checks: guard bytes around every buffer, sendbuf unchanged, no request
// left outstanding, no message left unreceived, and no (source, destination, tag) reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "algorithms/algorithm_test_harness.h"
#include "algorithms/double_tree_shape.h"
#include "tests/support/sweep_limits.h"

namespace collx {
namespace algo {
namespace {

using namespace testing_support;
using collx::testing::kLargeSweepCount;
using collx::testing::large_count_pair_wanted;
using testing::InprocFabric;
using testing::InprocOptions;
using SendMode = InprocOptions::SendMode;

const std::vector<collx_datatype_t> kAllDatatypes = {
    COLLX_INT8,    COLLX_UINT8,    COLLX_INT32,   COLLX_UINT32,  COLLX_INT64,
    COLLX_UINT64,  COLLX_FLOAT16,  COLLX_BFLOAT16, COLLX_FLOAT32, COLLX_FLOAT64};
const std::vector<collx_op_t> kAllOps = {COLLX_SUM, COLLX_PROD, COLLX_MIN, COLLX_MAX};
const std::vector<int> kWorldSizes = {1, 2, 3, 4, 5, 8};
const std::vector<size_t> kCounts = {0, 1, 7, 1000, 65536 + 3};

struct Case {
  int size = 1;
  size_t count = 0;
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  bool in_place = false;
  int root = 0;
  size_t chunk_bytes = 4096;
  SendMode mode = SendMode::kEager;
  uint64_t seed = 1;
};

std::string describe(const AlgorithmInfo& algo, const Case& c) {
  return string_printf("%s p=%d count=%zu %s %s %s root=%d chunk=%zu %s", algo.name, c.size, c.count,
                       datatype_name(c.datatype), op_name(c.op), c.in_place ? "in-place" : "out-of-place",
                       c.root, c.chunk_bytes, c.mode == SendMode::kEager ? "eager" : "rendezvous");
}

bool reduces(collx_coll_t kind) {
  return kind == COLLX_COLL_ALLREDUCE || kind == COLLX_COLL_REDUCE_SCATTER || kind == COLLX_COLL_REDUCE;
}

// Elements of each rank's input and output buffers.
void buffer_elems(collx_coll_t kind, const Case& c, size_t* in, size_t* out) {
  const size_t p = static_cast<size_t>(c.size);
  switch (kind) {
    case COLLX_COLL_REDUCE_SCATTER: *in = p * c.count; *out = c.count; break;
    case COLLX_COLL_ALLGATHER: *in = c.count; *out = p * c.count; break;
    case COLLX_COLL_ALLTOALL: *in = p * c.count; *out = p * c.count; break;
    default: *in = c.count; *out = c.count; break;
  }
}

struct RankBuffers {
  std::unique_ptr<GuardedBuffer> send;  // out of place only
  std::unique_ptr<GuardedBuffer> recv;
  std::vector<char> input_snapshot;     // what the input held before the call
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
};

// Every rank's input values, in elements of its input buffer (none for broadcast non-roots).
std::vector<std::vector<double>> make_inputs(const AlgorithmInfo& algo, const Case& c) {
  size_t in_elems, out_elems;
  buffer_elems(algo.kind, c, &in_elems, &out_elems);
  const collx_op_t value_op = reduces(algo.kind) ? c.op : COLLX_MIN;  // MIN: a wide value range
  std::vector<std::vector<double>> inputs(static_cast<size_t>(c.size));
  for (int r = 0; r < c.size; ++r) {
    if (algo.kind == COLLX_COLL_BROADCAST && r != c.root) continue;
    auto& in = inputs[static_cast<size_t>(r)];
    in.resize(in_elems);
    for (size_t i = 0; i < in_elems; ++i) in[i] = input_value(c.datatype, value_op, r, c.size, i, c.seed);
  }
  return inputs;
}

// Lays out rank `rank`'s buffers for the case (in-place layouts of collx.h) and fills its input.
RankBuffers make_buffers(const AlgorithmInfo& algo, const Case& c, int rank, const std::vector<double>& values) {
  const size_t es = datatype_size(c.datatype);
  size_t in_elems, out_elems;
  buffer_elems(algo.kind, c, &in_elems, &out_elems);
  const bool writes_output = algo.kind != COLLX_COLL_REDUCE || rank == c.root;
  RankBuffers b;
  char* input = nullptr;
  if (c.in_place) {
    // One buffer; the input sits where collx.h puts it.
    const size_t total = std::max(in_elems, out_elems);
    b.recv = std::make_unique<GuardedBuffer>(total * es);
    std::memset(b.recv->data(), 0x5A, total * es);
    input = b.recv->data();
    b.recvbuf = b.recv->data();
    if (algo.kind == COLLX_COLL_ALLGATHER) input += static_cast<size_t>(rank) * c.count * es;
    if (algo.kind == COLLX_COLL_REDUCE_SCATTER) b.recvbuf = input + static_cast<size_t>(rank) * c.count * es;
  } else {
    b.send = std::make_unique<GuardedBuffer>(in_elems * es);
    input = b.send->data();
    b.recv = std::make_unique<GuardedBuffer>(out_elems * es);
    std::memset(b.recv->data(), 0x5A, out_elems * es);
    b.recvbuf = b.recv->data();
  }
  if (!writes_output) b.recvbuf = nullptr;  // reduce: recvbuf may be NULL off the root
  if (!values.empty()) {
    store_elements(input, c.datatype, values.data(), in_elems);
    b.sendbuf = input;
    b.input_snapshot.assign(input, input + in_elems * es);
  }
  return b;
}

// The reference output of every rank, in elements of its output buffer.
std::vector<std::vector<double>> expected_outputs(const AlgorithmInfo& algo, const Case& c,
                                                  const std::vector<std::vector<double>>& in) {
  const size_t n = c.count;
  const size_t p = static_cast<size_t>(c.size);
  std::vector<double> reduced;
  if (reduces(algo.kind)) {
    reduced = in[0];
    for (size_t r = 1; r < p; ++r) {
      for (size_t i = 0; i < reduced.size(); ++i) reduced[i] = apply_op(c.op, reduced[i], in[r][i]);
    }
  }
  std::vector<std::vector<double>> out(p);
  for (size_t rank = 0; rank < p; ++rank) {
    std::vector<double>& o = out[rank];
    switch (algo.kind) {
      case COLLX_COLL_ALLREDUCE:
      case COLLX_COLL_REDUCE:
        o = reduced;
        break;
      case COLLX_COLL_REDUCE_SCATTER:
        o.assign(reduced.begin() + static_cast<ptrdiff_t>(rank * n), reduced.begin() + static_cast<ptrdiff_t>((rank + 1) * n));
        break;
      case COLLX_COLL_ALLGATHER:
        for (size_t r = 0; r < p; ++r) o.insert(o.end(), in[r].begin(), in[r].end());
        break;
      case COLLX_COLL_BROADCAST:
        o = in[static_cast<size_t>(c.root)];
        break;
      case COLLX_COLL_ALLTOALL:
        for (size_t r = 0; r < p; ++r) {
          o.insert(o.end(), in[r].begin() + static_cast<ptrdiff_t>(rank * n),
                   in[r].begin() + static_cast<ptrdiff_t>((rank + 1) * n));
        }
        break;
      default:
        break;
    }
  }
  return out;
}

::testing::AssertionResult check_case(const AlgorithmInfo& algo, const Case& c) {
  InprocOptions options;
  options.send_mode = c.mode;
  options.track_tag_reuse = true;
  InprocFabric fabric(c.size, options);
  RankPools pools(c.size);
  const std::vector<std::vector<double>> inputs = make_inputs(algo, c);
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < c.size; ++r) buffers.push_back(make_buffers(algo, c, r, inputs[static_cast<size_t>(r)]));
  std::vector<Status> statuses(static_cast<size_t>(c.size));

  fabric.run([&](int rank) {
    RankBuffers& b = buffers[static_cast<size_t>(rank)];
    CollArgs args;
    args.sendbuf = b.sendbuf;
    args.recvbuf = b.recvbuf;
    args.count = c.count;
    args.datatype = c.datatype;
    args.op = c.op;
    args.root = c.root;
    args.desc = make_desc(algo, c.count, c.datatype, c.op, c.root, 7);
    args.deadline = Deadline::after_ms(60000);
    statuses[static_cast<size_t>(rank)] = algo.fn(make_context(fabric, pools, rank, c.chunk_bytes), args);
  });

  const std::vector<std::vector<double>> expected_all = expected_outputs(algo, c, inputs);
  for (int r = 0; r < c.size; ++r) {
    const RankBuffers& b = buffers[static_cast<size_t>(r)];
    const Status& st = statuses[static_cast<size_t>(r)];
    if (!st.ok()) {
      return ::testing::AssertionFailure() << "rank " << r << " failed: " << status_name(st.code()) << " "
                                           << st.message();
    }
    if ((b.send && !b.send->guards_intact()) || (b.recv && !b.recv->guards_intact())) {
      return ::testing::AssertionFailure() << "rank " << r << " wrote outside its buffers";
    }
    // sendbuf is never written; in place, only the output range may change.
    const bool input_is_output = c.in_place && b.recvbuf != nullptr;
    if (!input_is_output && b.sendbuf &&
        std::memcmp(b.sendbuf, b.input_snapshot.data(), b.input_snapshot.size()) != 0) {
      return ::testing::AssertionFailure() << "rank " << r << " modified sendbuf";
    }
    if (fabric.outstanding_requests(r) != 0 || fabric.unexpected_messages(r) != 0) {
      return ::testing::AssertionFailure() << "rank " << r << " left " << fabric.outstanding_requests(r)
                                           << " requests outstanding and " << fabric.unexpected_messages(r)
                                           << " messages unreceived";
    }
    if (!b.recvbuf) continue;
    const std::vector<double>& expected = expected_all[static_cast<size_t>(r)];
    std::vector<double> got(expected.size());
    load_elements(b.recvbuf, c.datatype, got.data(), got.size());
    if (got != expected) {
      const size_t i = static_cast<size_t>(std::mismatch(got.begin(), got.end(), expected.begin()).first - got.begin());
      return ::testing::AssertionFailure() << "rank " << r << " element " << i << ": got " << got[i]
                                           << ", expected " << expected[i];
    }
  }
  if (fabric.tag_reuses() != 0) {
    return ::testing::AssertionFailure() << fabric.tag_reuses() << " messages reused a tag";
  }
  return ::testing::AssertionSuccess();
}

const AlgorithmInfo& find_algorithm(const std::string& name) {
  for (const AlgorithmInfo& a : all_algorithms()) {
    if (name == a.name) return a;
  }
  ADD_FAILURE() << "no algorithm " << name;
  return all_algorithms().front();
}

struct Sweep {
  std::vector<int> sizes = kWorldSizes;
  std::vector<size_t> counts = kCounts;
  std::vector<collx_datatype_t> datatypes = kAllDatatypes;
  std::vector<collx_op_t> ops = kAllOps;  // data-movement collectives use the first only
  std::vector<size_t> chunk_bytes = {4096};
  SendMode mode = SendMode::kEager;
  // Reduce-scatter, all-gather and all-to-all move size * count elements per rank: above
  // 1000, run them with about count / size (kept odd) so the sweep's time stays bounded.
  bool scale_large_counts = true;
  // From 64K elements only the (datatype, op) pairs of large_count_pair_wanted: the full
  // sweep's large count checks chunking, not every element type's arithmetic again.
  bool thin_large_counts = false;
};

size_t effective_count(const AlgorithmInfo& algo, const Sweep& sweep, size_t count, int size) {
  const bool per_rank_count = algo.kind == COLLX_COLL_REDUCE_SCATTER || algo.kind == COLLX_COLL_ALLGATHER ||
                              algo.kind == COLLX_COLL_ALLTOALL;
  if (!sweep.scale_large_counts || !per_rank_count || count <= 1000) return count;
  return std::max<size_t>(1001, count / static_cast<size_t>(size)) | 1;
}

void run_sweep(const std::string& name, const Sweep& sweep) {
  const AlgorithmInfo& algo = find_algorithm(name);
  const bool has_in_place = algo.kind != COLLX_COLL_ALLTOALL;
  const size_t op_count = reduces(algo.kind) ? sweep.ops.size() : 1;
  int failures = 0;
  uint64_t case_index = 0;
  for (int size : sweep.sizes) {
    for (size_t count : sweep.counts) {
      for (collx_datatype_t dt : sweep.datatypes) {
        for (size_t o = 0; o < op_count; ++o) {
          const collx_op_t pair_op = reduces(algo.kind) ? sweep.ops[o] : COLLX_SUM;
          if (sweep.thin_large_counts && !large_count_pair_wanted(count, dt, pair_op)) continue;
          for (size_t chunk : sweep.chunk_bytes) {
            for (int in_place = 0; in_place <= (has_in_place ? 1 : 0); ++in_place) {
              Case c;
              c.size = size;
              c.count = effective_count(algo, sweep, count, size);
              c.datatype = dt;
              c.op = sweep.ops[o];
              c.in_place = in_place != 0;
              c.root = static_cast<int>(case_index % static_cast<uint64_t>(size));  // every root in turn
              c.chunk_bytes = chunk;
              c.mode = sweep.mode;
              c.seed = ++case_index;
              ::testing::AssertionResult result = check_case(algo, c);
              if (!result) {
                ADD_FAILURE() << describe(algo, c) << ": " << result.message();
                if (++failures >= 5) return;
              }
            }
          }
        }
      }
    }
  }
}

class EveryAlgorithm : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAlgorithm, MatchesReferenceForEverySizeCountTypeAndOp) {
  Sweep sweep;
  sweep.thin_large_counts = true;
  run_sweep(GetParam(), sweep);
}

TEST_P(EveryAlgorithm, MatchesReferenceWithTinyAndOddChunks) {
  Sweep sweep;
  sweep.sizes = {2, 3, 5, 8};
  sweep.counts = {7, 333, 1000};
  sweep.datatypes = {COLLX_INT8, COLLX_FLOAT16, COLLX_FLOAT32, COLLX_FLOAT64};
  sweep.ops = {COLLX_SUM, COLLX_MAX};
  sweep.chunk_bytes = {1, 64, 100};
  run_sweep(GetParam(), sweep);
}

TEST_P(EveryAlgorithm, MatchesReferenceWithRendezvousSends) {
  Sweep sweep;
  sweep.sizes = {2, 3, 4, 5, 8};
  sweep.counts = {1, 1000, 65536 + 3};
  sweep.datatypes = {COLLX_INT32, COLLX_BFLOAT16};
  sweep.ops = {COLLX_SUM, COLLX_MIN};
  sweep.chunk_bytes = {256, 65536};
  sweep.mode = SendMode::kRendezvous;
  run_sweep(GetParam(), sweep);
}

TEST_P(EveryAlgorithm, MatchesReferenceForAMillionElements) {
  Sweep sweep;
  sweep.sizes = {3, 5};
  sweep.counts = {kLargeSweepCount};  // 64K + 3 under sanitizers (sweep_limits.h)
  sweep.datatypes = {COLLX_FLOAT32};
  sweep.ops = {COLLX_SUM};
  sweep.chunk_bytes = {512 * 1024};
  sweep.scale_large_counts = false;
  run_sweep(GetParam(), sweep);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, EveryAlgorithm,
                         ::testing::Values("allreduce_ring", "allreduce_recursive_doubling", "allreduce_rabenseifner",
                                           "allreduce_double_tree", "reduce_scatter_ring",
                                           "allgather_ring", "broadcast_binomial", "reduce_binomial",
                                           "alltoall_pairwise"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// In-place and out-of-place calls reduce in the same order, so they agree bit for bit even
// where rounding happens (float16 sums of non-integers).
TEST(AllreduceRing, InPlaceAndOutOfPlaceAgreeBitForBit) {
  const int p = 5;
  const size_t count = 3001;
  std::vector<std::vector<uint16_t>> results;
  for (bool in_place : {false, true}) {
    InprocFabric fabric(p);
    RankPools pools(p);
    std::vector<std::vector<uint16_t>> send(p, std::vector<uint16_t>(count)), recv(p, std::vector<uint16_t>(count));
    for (int r = 0; r < p; ++r) {
      for (size_t i = 0; i < count; ++i) send[r][i] = float_to_half(0.1f * static_cast<float>((i * 7 + r * 3) % 23));
      if (in_place) recv[r] = send[r];
    }
    const AlgorithmInfo& algo = find_algorithm("allreduce_ring");
    fabric.run([&](int rank) {
      CollArgs args;
      args.sendbuf = in_place ? recv[rank].data() : send[rank].data();
      args.recvbuf = recv[rank].data();
      args.count = count;
      args.datatype = COLLX_FLOAT16;
      args.desc = make_desc(algo, count, COLLX_FLOAT16, COLLX_SUM, -1, 1);
      args.deadline = Deadline::after_ms(30000);
      ASSERT_TRUE(allreduce_ring(make_context(fabric, pools, rank, 256), args).ok());
    });
    for (int r = 1; r < p; ++r) ASSERT_EQ(recv[0], recv[r]) << "ranks disagree";
    results.push_back(recv[0]);
  }
  EXPECT_EQ(results[0], results[1]);
}

// All-reduce run over ring positions instead of ranks (Context::rank_at, the host-grouped
// ring order of multi-host jobs): same result on every rank, whatever the order.
TEST(Allreduce, ReorderedRingPositionsGiveTheSameResult) {
  const int p = 5;
  const int order[p] = {0, 2, 4, 1, 3};  // position -> transport rank
  int position_of[p];
  for (int v = 0; v < p; ++v) position_of[order[v]] = v;
  for (const char* name :
       {"allreduce_ring", "allreduce_recursive_doubling", "allreduce_rabenseifner", "allreduce_double_tree"}) {
    SCOPED_TRACE(name);
    const AlgorithmInfo& algo = find_algorithm(name);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
      InprocFabric fabric(p);
      RankPools pools(p);
      std::vector<std::vector<int32_t>> buf(p, std::vector<int32_t>(count));
      for (int r = 0; r < p; ++r) {
        for (size_t i = 0; i < count; ++i) buf[r][i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(r) * 13) % 101);
      }
      fabric.run([&](int rank) {
        CollArgs args;
        args.sendbuf = buf[rank].data();
        args.recvbuf = buf[rank].data();
        args.count = count;
        args.datatype = COLLX_INT32;
        args.desc = make_desc(algo, count, COLLX_INT32, COLLX_SUM, -1, 1);
        args.deadline = Deadline::after_ms(30000);
        Context ctx = make_context(fabric, pools, rank, 4096);
        ctx.rank = position_of[rank];
        ctx.rank_at = order;
        Status st = algo.fn(ctx, args);
        ASSERT_TRUE(st.ok()) << st.message();
      });
      for (size_t i = 0; i < count; ++i) {
        int32_t expected = 0;
        for (int r = 0; r < p; ++r) expected += static_cast<int32_t>((i * 7 + static_cast<size_t>(r) * 13) % 101);
        for (int r = 0; r < p; ++r) ASSERT_EQ(buf[r][i], expected) << "rank " << r << " element " << i << " count " << count;
      }
    }
  }
}

// Collectives back to back on one fabric, with the active op set as the core does: no
// message of one collective is taken by another, nothing is left behind.
TEST(Collectives, RunBackToBackWithoutCrossTalk) {
  for (SendMode mode : {SendMode::kEager, SendMode::kRendezvous}) {
    const int p = 5;
    InprocOptions options;
    options.send_mode = mode;
    InprocFabric fabric(p, options);
    RankPools pools(p);
    const size_t count = 777;
    std::vector<Status> failures(p);
    fabric.run([&](int rank) {
      std::vector<float> send(count * p), recv(count * p);
      uint64_t seq = 0;
      for (int round = 0; round < 3; ++round) {
        for (const AlgorithmInfo& algo : all_algorithms()) {
          for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>((i + rank + round) % 5);
          CollArgs args;
          args.sendbuf = send.data();
          args.recvbuf = recv.data();
          args.count = count;
          args.datatype = COLLX_FLOAT32;
          args.op = COLLX_SUM;
          args.root = round % p;
          args.desc = make_desc(algo, count, COLLX_FLOAT32, COLLX_SUM, args.root, ++seq);
          args.deadline = Deadline::after_ms(30000);
          fabric.endpoint(rank)->set_active_op(&args.desc);
          Status st = algo.fn(make_context(fabric, pools, rank, 512), args);
          fabric.endpoint(rank)->set_active_op(nullptr);
          if (!st.ok()) {
            failures[rank] = st.with_context(std::string(algo.name) + ": ");
            return;
          }
          if (algo.kind == COLLX_COLL_ALLREDUCE) {
            for (size_t i = 0; i < count; ++i) {
              float expected = 0;
              for (int r = 0; r < p; ++r) expected += static_cast<float>((i + r + round) % 5);
              if (recv[i] != expected) {
                failures[rank] = make_status(COLLX_ERR_INTERNAL, "%s: element %zu wrong", algo.name, i);
                return;
              }
            }
          }
        }
      }
    });
    for (int r = 0; r < p; ++r) {
      EXPECT_TRUE(failures[r].ok()) << "rank " << r << ": " << failures[r].message();
      EXPECT_EQ(fabric.outstanding_requests(r), 0u);
      EXPECT_EQ(fabric.unexpected_messages(r), 0u);
      EXPECT_TRUE(fabric.endpoint(r)->health().ok());
    }
  }
}

// The two trees of the double binary tree, for p = 1..33: each spans every rank once from its
// root, parent and child links agree, depth stays within floor(log2 p), and no rank is
// interior (has children) in both trees.
TEST(DoubleTreeShape, TwoSpanningTreesWithDisjointInteriorNodes) {
  for (int p = 1; p <= 33; ++p) {
    SCOPED_TRACE(p);
    std::vector<std::vector<TreeNode>> nodes(2);
    for (int t = 0; t < 2; ++t) {
      for (int r = 0; r < p; ++r) nodes[t].push_back(double_tree_node(t, r, p));
    }
    for (int t = 0; t < 2; ++t) {
      int root = -1;
      for (int r = 0; r < p; ++r) {
        const TreeNode& n = nodes[t][r];
        ASSERT_LE(n.num_children, 2);
        ASSERT_LE(n.depth, double_tree_max_depth(p));
        if (n.parent < 0) {
          ASSERT_EQ(root, -1) << "tree " << t << " has two roots";
          root = r;
          EXPECT_EQ(n.depth, 0);
        } else {
          ASSERT_GE(n.parent, 0);
          ASSERT_LT(n.parent, p);
          const TreeNode& parent = nodes[t][n.parent];
          EXPECT_TRUE(parent.children[0] == r || parent.children[1] == r)
              << "tree " << t << ": rank " << r << " is not a child of its parent " << n.parent;
          EXPECT_EQ(n.depth, parent.depth + 1);
        }
        for (int c = 0; c < n.num_children; ++c) {
          ASSERT_GE(n.children[c], 0);
          ASSERT_LT(n.children[c], p);
          EXPECT_EQ(nodes[t][n.children[c]].parent, r) << "tree " << t << ": child " << n.children[c];
        }
        for (int c = n.num_children; c < 2; ++c) EXPECT_EQ(n.children[c], -1);
      }
      ASSERT_GE(root, 0) << "tree " << t << " has no root";
      // Every rank reached exactly once from the root.
      std::vector<int> seen(p, 0);
      std::vector<int> stack = {root};
      while (!stack.empty()) {
        const int r = stack.back();
        stack.pop_back();
        ASSERT_EQ(seen[r]++, 0) << "tree " << t << " reaches rank " << r << " twice";
        for (int c = 0; c < nodes[t][r].num_children; ++c) stack.push_back(nodes[t][r].children[c]);
      }
      for (int r = 0; r < p; ++r) EXPECT_EQ(seen[r], 1) << "tree " << t << " misses rank " << r;
    }
    for (int r = 0; r < p; ++r) {
      EXPECT_FALSE(nodes[0][r].num_children > 0 && nodes[1][r].num_children > 0)
          << "rank " << r << " is interior in both trees";
    }
    // Distinct roots, so the two halves' sums are finished on different ranks.
    auto root_of = [&](int t) {
      return std::find_if(nodes[t].begin(), nodes[t].end(), [](const TreeNode& n) { return n.parent < 0; }) -
             nodes[t].begin();
    };
    if (p >= 2) {
      EXPECT_NE(root_of(0), root_of(1)) << "both trees have the same root";
    }
  }
}

// No rank leaves the barrier before the last one entered it.
TEST(BarrierDissemination, NoRankLeavesBeforeAllEntered) {
  const AlgorithmInfo& algo = find_algorithm("barrier_dissemination");
  for (int p : kWorldSizes) {
    for (int late : {0, p - 1, p / 2}) {
      InprocFabric fabric(p);
      RankPools pools(p);
      std::atomic<int> entered{0};
      std::vector<int> seen(p, -1);
      std::vector<Status> statuses(p);
      fabric.run([&](int rank) {
        if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        entered.fetch_add(1);
        CollArgs args;
        args.desc = make_desc(algo, 0, COLLX_FLOAT32, COLLX_SUM, -1, 3);
        args.deadline = Deadline::after_ms(30000);
        statuses[rank] = barrier_dissemination(make_context(fabric, pools, rank, 4096), args);
        seen[rank] = entered.load();
      });
      for (int r = 0; r < p; ++r) {
        EXPECT_TRUE(statuses[r].ok()) << statuses[r].message();
        EXPECT_EQ(seen[r], p) << "p=" << p << ": rank " << r << " left the barrier before rank " << late << " entered";
        EXPECT_EQ(fabric.outstanding_requests(r), 0u);
      }
    }
  }
}

}  // namespace
}  // namespace algo
}  // namespace collx
