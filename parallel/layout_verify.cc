// Layout planner: fingerprint, and the collective check that every rank built the same
// layout inputs (names the first differing config field or tensor).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "parallel/parallel_internal.h"

using collx::parallel::guarded;
using collx::parallel::layout_fail;

namespace {

constexpr size_t kConfigWords = 8;  // 7 config fields + the number of tensors
constexpr size_t kTensorWords = 4;  // id, numel, dtype | present << 32, flags
const char* const kConfigNames[7] = {"dp_size",            "reverse",   "partition",
                                     "align_elems",        "bucket_elems",
                                     "first_bucket_elems", "bucket_pad"};

void config_words(const collx_layout_s& l, uint64_t* w) {
  const collx_layout_config_t& c = l.config;
  w[0] = static_cast<uint64_t>(static_cast<int64_t>(c.dp_size));
  w[1] = static_cast<uint64_t>(static_cast<int64_t>(c.reverse));
  w[2] = static_cast<uint64_t>(static_cast<int64_t>(c.partition));
  w[3] = c.align_elems;
  w[4] = c.bucket_elems;
  w[5] = c.first_bucket_elems;
  w[6] = c.bucket_pad;
  w[7] = l.tensors.size();
}

uint64_t fingerprint(const collx_layout_s& l) {
  collx::parallel::Fnv64 h;
  h.bytes("collx.layout.v1", 15);
  uint64_t w[kConfigWords];
  config_words(l, w);
  for (uint64_t v : w) h.u64(v);
  for (const auto& t : l.tensors) {
    h.u64(t.id);
    h.u64(t.numel);
    h.u64(static_cast<uint64_t>(static_cast<uint32_t>(t.dtype)));
    h.u64(t.flags);
  }
  return h.value();
}

std::string dtype_name(uint64_t w) {
  return collx_datatype_name(static_cast<collx_datatype_t>(static_cast<int32_t>(w & 0xffffffffu)));
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string full(const uint64_t* t) {
  return "tensor " + std::to_string(t[0]) + " (numel " + std::to_string(t[1]) + ", datatype " +
         dtype_name(t[2]) + ", flags " + hex(t[3]) + ")";
}

// Message for tensor records a (rank ra) and b (rank 0) that differ at index i.
std::string tensor_diff(size_t i, int32_t ra, const uint64_t* a, const uint64_t* b) {
  std::string at = "layout mismatch at registration index " + std::to_string(i) + ": ";
  std::string R = "rank " + std::to_string(ra);
  bool pa = (a[2] >> 32) != 0, pb = (b[2] >> 32) != 0;
  if (!pa) return at + R + " registered only " + std::to_string(i) + " tensors but rank 0 registered " + full(b) + " there";
  if (!pb) return at + R + " registered " + full(a) + " but rank 0 registered only " + std::to_string(i) + " tensors";
  if (a[0] != b[0]) return at + R + " registered " + full(a) + " but rank 0 registered " + full(b);
  std::string mine, theirs;
  auto field = [&](const char* name, const std::string& x, const std::string& y) {
    if (x == y) return;
    mine += std::string(mine.empty() ? "" : ", ") + name + " " + x;
    theirs += std::string(theirs.empty() ? "" : ", ") + name + " " + y;
  };
  field("numel", std::to_string(a[1]), std::to_string(b[1]));
  field("datatype", dtype_name(a[2]), dtype_name(b[2]));
  field("flags", hex(a[3]), hex(b[3]));
  return at + R + " registered tensor " + std::to_string(a[0]) + " with " + mine +
         " but rank 0 with " + theirs;
}

collx_status_t verify(collx_layout_t l, collx_comm_t comm) {
  const char* fn = "collx_layout_verify";
  int32_t size = 0;
  collx_status_t st = collx_comm_size(comm, &size);
  if (st != COLLX_OK) return layout_fail(l, st, std::string(fn) + ": " + collx_last_error(comm));
  auto comm_fail = [&](collx_status_t s, const char* what) {
    return layout_fail(l, s, std::string(fn) + ": allgather of the " + what + " failed: " +
                                 collx_last_error(comm));
  };
  const size_t W = static_cast<size_t>(size);
  uint64_t fp = fingerprint(*l);
  std::vector<uint64_t> fps(W);
  st = collx_allgather(&fp, fps.data(), 1, COLLX_UINT64, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(st, "fingerprints");
  bool same = true;
  for (size_t r = 1; r < W; ++r) same = same && fps[r] == fps[0];
  if (same) return COLLX_OK;

  // Every rank saw the difference: all take the same slow path.
  uint64_t cw[kConfigWords];
  config_words(*l, cw);
  std::vector<uint64_t> cws(W * kConfigWords);
  st = collx_allgather(cw, cws.data(), kConfigWords, COLLX_UINT64, comm, nullptr);
  if (st != COLLX_OK) return comm_fail(st, "layout configs");
  for (size_t r = 1; r < W; ++r) {
    for (size_t f = 0; f < 7; ++f) {
      uint64_t a = cws[r * kConfigWords + f], b = cws[f];
      if (a == b) continue;
      auto show = [&](uint64_t v) {
        return f < 3 ? std::to_string(static_cast<int64_t>(v)) : std::to_string(v);
      };
      return layout_fail(l, COLLX_ERR_MISMATCH,
                         std::string(fn) + ": layout config mismatch: rank " + std::to_string(r) +
                             " has " + kConfigNames[f] + " = " + show(a) + " but rank 0 has " +
                             show(b));
    }
  }
  size_t n_max = 0;
  for (size_t r = 0; r < W; ++r) n_max = std::max<size_t>(n_max, cws[r * kConfigWords + 7]);
  std::vector<uint64_t> mine(n_max * kTensorWords, 0);
  for (size_t i = 0; i < l->tensors.size(); ++i) {
    const auto& t = l->tensors[i];
    uint64_t* w = &mine[i * kTensorWords];
    w[0] = t.id;
    w[1] = t.numel;
    w[2] = static_cast<uint64_t>(static_cast<uint32_t>(t.dtype)) | (uint64_t{1} << 32);
    w[3] = t.flags;
  }
  std::vector<uint64_t> all(W * n_max * kTensorWords);
  if (n_max) {
    st = collx_allgather(mine.data(), all.data(), n_max * kTensorWords, COLLX_UINT64, comm, nullptr);
    if (st != COLLX_OK) return comm_fail(st, "tensor records");
  }
  for (size_t i = 0; i < n_max; ++i) {
    const uint64_t* b = &all[i * kTensorWords];
    for (size_t r = 1; r < W; ++r) {
      const uint64_t* a = &all[(r * n_max + i) * kTensorWords];
      if (std::memcmp(a, b, kTensorWords * sizeof(uint64_t)) != 0)
        return layout_fail(l, COLLX_ERR_MISMATCH,
                           std::string(fn) + ": " + tensor_diff(i, static_cast<int32_t>(r), a, b));
    }
  }
  size_t bad = 1;
  while (bad < W && fps[bad] == fps[0]) ++bad;
  return layout_fail(l, COLLX_ERR_MISMATCH,
                     std::string(fn) + ": rank " + std::to_string(bad) +
                         " has layout fingerprint " + hex(fps[bad]) + " but rank 0 has " +
                         hex(fps[0]) + " (inputs look identical; different library versions?)");
}

}  // namespace

extern "C" {

COLLX_API collx_status_t collx_layout_fingerprint(collx_layout_t layout, uint64_t* out) {
  if (!layout) return collx::parallel::refuse_arg(layout, "collx_layout_fingerprint", "layout is NULL");
  if (!out)
    return layout_fail(layout, COLLX_ERR_INVALID_ARG, "collx_layout_fingerprint: fingerprint is NULL");
  *out = fingerprint(*layout);
  return COLLX_OK;
}

COLLX_API collx_status_t collx_layout_verify(collx_layout_t layout, collx_comm_t comm) {
  if (!layout) return collx::parallel::refuse_arg(layout, "collx_layout_verify", "layout is NULL");
  if (!comm) return layout_fail(layout, COLLX_ERR_INVALID_ARG, "collx_layout_verify: comm is NULL");
  return guarded([&] { return verify(layout, comm); },
                 [&](const std::string& m) { layout_fail(layout, COLLX_OK, "collx_layout_verify: " + m); });
}

}  // extern "C"
