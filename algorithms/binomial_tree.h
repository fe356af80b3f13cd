// Binomial tree rooted at any rank, as MPICH builds it: ranks are renumbered relative to the
// root (vrank = (rank - root) mod p); the parent of vrank v is v with its lowest set bit
// cleared, and the children of v are v + 2^k for every 2^k below v's lowest set bit (all
// 2^k < p at the root) that stay below p.
#pragma once

#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {

struct BinomialTree {
  static constexpr int kMaxChildren = 32;

  int parent = -1;  // real rank; -1 at the root
  int num_children = 0;
  // Real ranks, largest subtree first (the order a broadcast should feed them). Child i
  // covers the vranks [vchild, vchild + 2^k), so in reverse order the children's subtrees
  // follow this rank's vrank left to right (the order a reduction combines them).
  int children[kMaxChildren] = {};

  static BinomialTree build(int rank, int size, int root) {
    BinomialTree tree;
    const int vrank = ring_mod(int64_t{rank} - root, size);
    int mask = 1;
    while (mask < size) {
      if (vrank & mask) {
        tree.parent = ring_mod(int64_t{vrank} - mask + root, size);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (vrank + mask < size) tree.children[tree.num_children++] = ring_mod(int64_t{vrank} + mask + root, size);
    }
    return tree;
  }
};

}  // namespace algo
}  // namespace collx
