// Double binary tree all-reduce (NCCL's "double binary tree"): the tree shapes live in
// double_tree_shape.h, the pipelined schedule in double_binary_tree.cc; the entry point,
// allreduce_double_tree, is declared with the other algorithms in algorithm.h.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"
#include "algorithms/double_tree_shape.h"

namespace collx {
namespace algo {

// How many pipeline iterations a rank's down (broadcast) phase of a chunk trails the up
// (reduce) phase of that chunk: enough for a chunk to climb to the root and come back to the
// deepest leaf, so a rank rarely waits for the result of a chunk it reduced earlier.
inline size_t double_tree_lag(int size) { return 2 * static_cast<size_t>(double_tree_max_depth(size)) + 1; }

}  // namespace algo
}  // namespace collx
