// Helpers of the v-collective tests: block layouts (packed, or placed in reverse rank order
// with gaps), buffers poisoned so gaps that must stay untouched can be checked, and a call
// that runs blocking or nonblocking alike.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

constexpr unsigned char kVPoison = 0xAB;

enum class VLayout { kPacked, kReversedWithGaps, kInPlace };

inline const char* vlayout_name(VLayout l) {
  return l == VLayout::kPacked ? "packed" : l == VLayout::kReversedWithGaps ? "gaps" : "in_place";
}

// Where each block goes: packed in rank order, or in reverse rank order with a gap of 2
// elements before and between blocks.
inline std::vector<size_t> vlayout_displs(const std::vector<size_t>& counts, VLayout layout) {
  const size_t n = counts.size();
  std::vector<size_t> displs(n, 0);
  if (layout == VLayout::kReversedWithGaps) {
    size_t at = 2;
    for (size_t r = n; r-- > 0;) {
      displs[r] = at;
      at += counts[r] + 2;
    }
    return displs;
  }
  for (size_t r = 1; r < n; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  return displs;
}

// What to pass as displs: NULL (packed) for the packed layout, else the array.
inline const size_t* vlayout_arg(const std::vector<size_t>& displs, VLayout layout) {
  return layout == VLayout::kPacked ? nullptr : displs.data();
}

inline size_t vlayout_extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t extent = 0;
  for (size_t r = 0; r < counts.size(); ++r) extent = std::max(extent, displs[r] + counts[r]);
  return extent;
}

// Elements of `buf` (extent elements of `elem` bytes) that no block covers but were written.
inline size_t vlayout_gaps_written(const std::vector<unsigned char>& buf, const std::vector<size_t>& counts,
                                   const std::vector<size_t>& displs, size_t elem) {
  const size_t extent = vlayout_extent(counts, displs);
  std::vector<bool> covered(extent, false);
  for (size_t r = 0; r < counts.size(); ++r) {
    for (size_t i = 0; i < counts[r]; ++i) covered[displs[r] + i] = true;
  }
  size_t written = 0;
  for (size_t e = 0; e < extent; ++e) {
    if (covered[e]) continue;
    for (size_t b = 0; b < elem; ++b) {
      if (buf[e * elem + b] != kVPoison) {
        ++written;
        break;
      }
    }
  }
  return written;
}

// Runs `start` (a blocking call when request is NULL, else its nonblocking form) and waits.
inline collx_status_t run_maybe_nonblocking(bool nonblocking,
                                            const std::function<collx_status_t(collx_request_t*)>& start) {
  if (!nonblocking) return start(nullptr);
  collx_request_t req = nullptr;
  collx_status_t rc = start(&req);
  if (rc != COLLX_OK) return rc;
  rc = collx_wait(req, -1);
  collx_request_free(req);
  return rc;
}

}  // namespace testing
}  // namespace collx
