// Rank math shared by the power-of-two algorithms (recursive doubling, Rabenseifner) for any
// world size. With pof2 the largest power of two <= p and rem = p - pof2, ranks below 2*rem
// pair up (2i, 2i+1): the even one folds its vector into the odd one and sits out, so pof2
// "new ranks" take part, and the odd ones unfold the result to their partner at the end.
#pragma once

namespace collx {
namespace algo {

inline int largest_power_of_two_at_most(int n) {
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  return pof2;
}

inline int log2_of_power_of_two(int pof2) {
  int log = 0;
  while ((1 << log) < pof2) ++log;
  return log;
}

// The real rank behind new rank `new_rank` of the power-of-two phase.
inline int fold_real_rank(int new_rank, int rem) { return new_rank < rem ? new_rank * 2 + 1 : new_rank + rem; }

// New rank of `rank` in the power-of-two phase, or -1 when it folded and sits out.
inline int fold_new_rank(int rank, int rem) {
  if (rank < 2 * rem) return rank % 2 == 0 ? -1 : rank / 2;
  return rank - rem;
}

}  // namespace algo
}  // namespace collx
