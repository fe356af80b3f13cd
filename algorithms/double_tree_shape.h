// The two binary trees of the double binary tree all-reduce (double_binary_tree.cc): pure
// arithmetic, no communication, so the shape can be tested on its own.
//
// Both trees are the same in-order binary tree over positions 1..p: a position's lowest set
// bit b gives its subtree the positions (x - b, x + b), its children are x - b/2 and the
// largest x + b/2^k (k >= 1) that still exists, and the root is the largest power of two
// <= p. Every odd position has b = 1 and is therefore a leaf, so only even positions can be
// interior. The trees differ only in how ranks map to positions:
//   tree 0: rank r sits at position r + 1           -> interior ranks are odd
//   tree 1: rank r sits at position (r + 1) % p + 1 -> interior ranks are even (r < p - 1),
//           and rank p - 1 sits at position 1, a leaf
// so no rank is interior in both trees, for every p (the mirror p - r would not do for odd
// p: it maps odd ranks to even positions again).
#pragma once

namespace collx {
namespace algo {

struct TreeNode {
  int parent = -1;             // rank; -1 at the root
  int children[2] = {-1, -1};  // ranks, smaller position first; -1 where absent
  int num_children = 0;
  int depth = 0;  // edges from the root
};

namespace tree_shape_detail {

inline int lowest_bit(int x) { return x & -x; }

inline int root_position(int p) {
  int root = 1;
  while (root * 2 <= p) root *= 2;
  return root;
}

// Children positions of x in the tree over 1..p (0 where absent).
inline void child_positions(int x, int p, int* left, int* right) {
  const int b = lowest_bit(x);
  *left = b >= 2 ? x - b / 2 : 0;  // x - b/2 >= 1 always
  int step = b / 2;
  while (step >= 1 && x + step > p) step /= 2;
  *right = step >= 1 ? x + step : 0;
}

inline int position_of(int tree, int rank, int p) { return tree == 0 ? rank + 1 : (rank + 1) % p + 1; }
inline int rank_of(int tree, int position, int p) { return tree == 0 ? position - 1 : (position - 2 + p) % p; }

}  // namespace tree_shape_detail

// Node `rank` of tree `tree` (0 or 1) over `size` ranks (size >= 1).
inline TreeNode double_tree_node(int tree, int rank, int size) {
  using namespace tree_shape_detail;
  TreeNode node;
  const int target = position_of(tree, rank, size);
  // Descend from the root as in a search tree; the walk gives parent and depth consistently
  // with child_positions, which defines the tree.
  int x = root_position(size);
  int parent = 0;
  while (x != target) {
    int left, right;
    child_positions(x, size, &left, &right);
    parent = x;
    x = target < x ? left : right;
    ++node.depth;
    if (x == 0) return TreeNode();  // unreachable: every position is in the tree
  }
  node.parent = parent == 0 ? -1 : rank_of(tree, parent, size);
  int left, right;
  child_positions(target, size, &left, &right);
  for (int c : {left, right}) {
    if (c != 0) node.children[node.num_children++] = rank_of(tree, c, size);
  }
  return node;
}

// Largest depth of either tree over `size` ranks: floor(log2 size).
inline int double_tree_max_depth(int size) {
  int depth = 0;
  while ((2 << depth) <= size) ++depth;
  return depth;
}

}  // namespace algo
}  // namespace collx
