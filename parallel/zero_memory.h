// ZeRO memory accounting: every element buffer a ZeRO handle owns is allocated through
// CountedAlloc, which adds the bytes it really allocates (and subtracts what it frees) to
// the handle's account, per category, with high-water marks. collx_zero_memory reads it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace collx {
namespace parallel {

enum class ZeroMem : int { kParams = 0, kGrads = 1, kOptim = 2, kComm = 3, kCount = 4 };

struct ZeroMemAccount {
  size_t now[4] = {0, 0, 0, 0};
  size_t peak[4] = {0, 0, 0, 0};
  size_t total = 0;
  size_t peak_total = 0;
  void add(ZeroMem c, size_t bytes) {
    const int i = static_cast<int>(c);
    now[i] += bytes;
    peak[i] = std::max(peak[i], now[i]);
    total += bytes;
    peak_total = std::max(peak_total, total);
  }
  void sub(ZeroMem c, size_t bytes) {
    now[static_cast<int>(c)] -= bytes;
    total -= bytes;
  }
};

// A std::allocator that books its allocations on an account (none: not counted, e.g. a
// map value default-constructed before a counted vector is moved into it). The allocator
// moves with the storage, so bytes are returned to the account they were taken from.
template <typename T>
struct CountedAlloc {
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  ZeroMemAccount* account = nullptr;
  ZeroMem category = ZeroMem::kParams;

  CountedAlloc() = default;
  CountedAlloc(ZeroMemAccount* a, ZeroMem c) : account(a), category(c) {}
  template <typename U>
  CountedAlloc(const CountedAlloc<U>& o) : account(o.account), category(o.category) {}  // NOLINT

  T* allocate(size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    if (account) account->add(category, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) {
    if (account) account->sub(category, n * sizeof(T));
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const CountedAlloc<U>& o) const {
    return account == o.account && category == o.category;
  }
  template <typename U>
  bool operator!=(const CountedAlloc<U>& o) const {
    return !(*this == o);
  }
};

template <typename T>
using CountedVec = std::vector<T, CountedAlloc<T>>;

}  // namespace parallel
}  // namespace collx
