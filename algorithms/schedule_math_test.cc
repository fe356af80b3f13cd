// The index math under the algorithms, checked by simulation: block layouts, the ring
// schedule (every rank ends with its own block fully reduced, then every block), binomial
// trees (a spanning tree of logarithmic depth for every root), and chunk plans (tag steps
// always fit).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/binomial_tree.h"
#include "algorithms/chunk_plan.h"
#include "algorithms/ring_pattern.h"
#include "transports/transport.h"

namespace collx {
namespace algo {
namespace {

TEST(BlockLayout, SplitsEvenlyAndContiguously) {
  for (int parts : {1, 2, 3, 5, 7, 8, 13}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{6}, size_t{7}, size_t{1000}, size_t{65539}}) {
      BlockLayout layout(count, parts);
      size_t next = 0, min_len = count, max_len = 0;
      for (int b = 0; b < parts; ++b) {
        EXPECT_EQ(layout.offset(b), next) << "count " << count << " parts " << parts << " block " << b;
        next += layout.length(b);
        min_len = std::min(min_len, layout.length(b));
        max_len = std::max(max_len, layout.length(b));
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(max_len - min_len, 1u);
      EXPECT_EQ(layout.max_length(), max_len);
    }
  }
}

// Simulates the ring: each rank tracks, per block, the set of ranks whose contributions its
// copy holds. Reduce steps merge, all-gather steps overwrite.
TEST(RingSchedule, ReduceScatterThenAllGatherGivesEveryRankEveryBlockFullyReduced) {
  for (int p = 1; p <= 17; ++p) {
    std::vector<std::vector<std::set<int>>> holds(p, std::vector<std::set<int>>(p));
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) holds[r][b] = {r};
    }
    for (int step = 0; step < 2 * p - 2; ++step) {
      auto before = holds;
      for (int r = 0; r < p; ++r) {
        const int left = ring_left(r, p);
        const int block = ring_recv_block(r, p, step);
        // The left neighbour sends exactly the block this rank expects.
        ASSERT_EQ(ring_send_block(left, p, step), block);
        // ...which is the block it received the step before.
        if (step > 0) {
          ASSERT_EQ(ring_recv_block(left, p, step - 1), block);
        }
        if (step < p - 1) {
          holds[r][block].insert(before[left][block].begin(), before[left][block].end());
        } else {
          holds[r][block] = before[left][block];
        }
      }
      if (step == p - 2) {
        for (int r = 0; r < p; ++r) EXPECT_EQ(holds[r][r].size(), static_cast<size_t>(p)) << "p=" << p << " rank " << r;
      }
    }
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) EXPECT_EQ(holds[r][b].size(), static_cast<size_t>(p)) << "p=" << p;
    }
  }
}

TEST(BinomialTree, SpansEveryRankWithLogDepthForEveryRoot) {
  for (int p = 1; p <= 33; ++p) {
    int log2_ceil = 0;
    while ((1 << log2_ceil) < p) ++log2_ceil;
    for (int root = 0; root < p; ++root) {
      std::vector<int> parent_of(p, -2);
      for (int r = 0; r < p; ++r) {
        BinomialTree tree = BinomialTree::build(r, p, root);
        EXPECT_EQ(tree.parent == -1, r == root);
        for (int i = 0; i < tree.num_children; ++i) {
          const int child = tree.children[i];
          EXPECT_EQ(parent_of[child], -2) << "two parents";
          parent_of[child] = r;
          EXPECT_EQ(BinomialTree::build(child, p, root).parent, r);
        }
      }
      for (int r = 0; r < p; ++r) {
        if (r == root) continue;
        int depth = 0;
        for (int x = r; x != root; x = parent_of[x]) {
          ASSERT_GE(parent_of[x], 0) << "rank " << x << " unreachable";
          ASSERT_LE(++depth, log2_ceil);
        }
      }
    }
  }
}

TEST(ChunkPlan, CoversBlocksAndKeepsTagStepsInRange) {
  struct Input { size_t block, elem, chunk_bytes; uint64_t steps; };
  const Input inputs[] = {
      {1000, 4, 64, 14},   {1000, 8, 100, 1},          {7, 2, 1, 2},
      {1, 8, 512 * 1024, 14}, {size_t{1} << 30, 1, 1, 14}, {size_t{1} << 40, 8, 64, 4094},
  };
  for (const Input& in : inputs) {
    ChunkPlan plan;
    ASSERT_TRUE(plan_chunks(in.block, in.elem, in.chunk_bytes, in.steps, &plan).ok());
    EXPECT_GE(plan.chunk_elems, 1u);
    EXPECT_GE(plan.chunks * plan.chunk_elems, in.block);
    EXPECT_LT((plan.chunks - 1) * plan.chunk_elems, in.block);
    EXPECT_LE(plan.chunks * in.steps, transport::kCollMaxSteps);
    EXPECT_LE(plan.chunks, kMaxChunksPerBlock);
    if (in.block / std::max<size_t>(1, in.chunk_bytes / in.elem) < 1000) {
      EXPECT_LE(plan.chunk_elems * in.elem, std::max(in.chunk_bytes, in.elem)) << "chunk grown needlessly";
    }
  }
  ChunkPlan empty;
  ASSERT_TRUE(plan_chunks(0, 4, 64, 14, &empty).ok());
  EXPECT_EQ(empty.chunks, 0u);
  ChunkPlan impossible;
  EXPECT_EQ(plan_chunks(10, 4, 64, transport::kCollMaxSteps + 1, &impossible).code(), COLLX_ERR_INTERNAL);
}

}  // namespace
}  // namespace algo
}  // namespace collx
