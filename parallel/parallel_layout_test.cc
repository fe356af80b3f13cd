// Layout planner: offsets, buckets, padding, ownership, shards, fingerprint and errors.
#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"

namespace {

collx_layout_config_t config(int32_t dp) {
  collx_layout_config_t c;
  EXPECT_EQ(collx_layout_config_init(&c, sizeof c), COLLX_OK);
  c.dp_size = dp;
  return c;
}

collx_layout_t build(const collx_layout_config_t& c, const std::vector<size_t>& sizes, bool finalize = true) {
  collx_layout_t l = nullptr;
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_OK) << collx_layout_last_error(nullptr);
  for (size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(collx_layout_add(l, i, sizes[i], COLLX_FLOAT32, 0), COLLX_OK);
  if (finalize) {
    EXPECT_EQ(collx_layout_finalize(l), COLLX_OK);
  }
  return l;
}

size_t offset_of(collx_layout_t l, uint64_t id) {
  size_t off = 0, n = 0;
  EXPECT_EQ(collx_layout_tensor(l, id, &off, &n), COLLX_OK);
  return off;
}

TEST(ParallelLayout, DefaultsMatchMegatron) {
  collx_layout_config_t c = config(4);
  EXPECT_EQ(c.align_elems, 64u);
  EXPECT_EQ(c.reverse, 1);
  EXPECT_EQ(c.bucket_elems, 0u);
  EXPECT_EQ(c.bucket_pad, 0u);
  EXPECT_EQ(c.partition, COLLX_PART_FLAT);
}

TEST(ParallelLayout, AlignedOffsetsInReverseOrder) {
  collx_layout_config_t c = config(4);
  collx_layout_t l = build(c, {10, 100, 3, 64, 5});
  // Reverse: 4 at 0 (5), 3 at 64, 2 at 128, 1 at 192, 0 at 320; end 330, padded to 128.
  EXPECT_EQ(offset_of(l, 4), 0u);
  EXPECT_EQ(offset_of(l, 3), 64u);
  EXPECT_EQ(offset_of(l, 2), 128u);
  EXPECT_EQ(offset_of(l, 1), 192u);
  EXPECT_EQ(offset_of(l, 0), 320u);
  size_t nb = 0, start = 9, padded = 0, numel = 0, total = 0;
  EXPECT_EQ(collx_layout_num_buckets(l, &nb), COLLX_OK);
  EXPECT_EQ(nb, 1u);
  EXPECT_EQ(collx_layout_bucket(l, 0, &start, &padded, &numel), COLLX_OK);
  EXPECT_EQ(start, 0u);
  EXPECT_EQ(numel, 330u);
  EXPECT_EQ(padded, 384u);
  EXPECT_EQ(collx_layout_total(l, &total), COLLX_OK);
  EXPECT_EQ(total, 384u);
  collx_layout_destroy(l);

  c.reverse = 0;
  l = build(c, {10, 100, 3, 64, 5});
  EXPECT_EQ(offset_of(l, 0), 0u);
  EXPECT_EQ(offset_of(l, 1), 64u);
  EXPECT_EQ(offset_of(l, 2), 192u);
  EXPECT_EQ(offset_of(l, 3), 256u);
  EXPECT_EQ(offset_of(l, 4), 320u);
  collx_layout_destroy(l);
}

TEST(ParallelLayout, BucketsCutWithSmallFirstBucketAndPadded) {
  collx_layout_config_t c = config(2);
  c.align_elems = 1;
  c.reverse = 0;
  c.bucket_elems = 100;
  c.first_bucket_elems = 30;
  c.bucket_pad = 4;
  collx_layout_t l = build(c, {20, 20, 50, 60, 10, 5});
  size_t nb = 0;
  ASSERT_EQ(collx_layout_num_buckets(l, &nb), COLLX_OK);
  ASSERT_EQ(nb, 3u);
  const size_t want[3][3] = {{0, 40, 40}, {40, 112, 110}, {152, 16, 15}};
  for (size_t b = 0; b < 3; ++b) {
    size_t s = 0, p = 0, n = 0;
    ASSERT_EQ(collx_layout_bucket(l, b, &s, &p, &n), COLLX_OK);
    EXPECT_EQ(s, want[b][0]) << b;
    EXPECT_EQ(p, want[b][1]) << b;
    EXPECT_EQ(n, want[b][2]) << b;
  }
  size_t bucket = 9;
  EXPECT_EQ(collx_layout_tensor_bucket(l, 3, &bucket, nullptr), COLLX_OK);
  EXPECT_EQ(bucket, 1u);
  EXPECT_EQ(offset_of(l, 4), 152u);
  // Owner ranges of bucket 1: 56 each.
  size_t os = 0, oc = 0;
  EXPECT_EQ(collx_layout_owned(l, 1, 1, &os, &oc), COLLX_OK);
  EXPECT_EQ(os, 96u);
  EXPECT_EQ(oc, 56u);
  // Tensor 3 [90, 150) straddles ranks 0 [40, 96) and 1 [96, 152).
  size_t to = 0, bo = 0, cnt = 0;
  EXPECT_EQ(collx_layout_tensor_shard(l, 3, 0, &to, &bo, &cnt), COLLX_OK);
  EXPECT_EQ(to, 0u);
  EXPECT_EQ(bo, 90u);
  EXPECT_EQ(cnt, 6u);
  EXPECT_EQ(collx_layout_tensor_shard(l, 3, 1, &to, &bo, &cnt), COLLX_OK);
  EXPECT_EQ(to, 6u);
  EXPECT_EQ(bo, 96u);
  EXPECT_EQ(cnt, 54u);
  collx_layout_destroy(l);
}

TEST(ParallelLayout, DefaultBucketPadIsLcmOfDpAnd128) {
  collx_layout_config_t c = config(3);
  collx_layout_t l = build(c, {1000});
  size_t p = 0;
  ASSERT_EQ(collx_layout_bucket(l, 0, nullptr, &p, nullptr), COLLX_OK);
  EXPECT_EQ(p, 1152u);  // 3 * 384
  collx_layout_destroy(l);
}

TEST(ParallelLayout, PerTensorPadding) {
  collx_layout_config_t c = config(4);
  c.partition = COLLX_PART_PER_TENSOR;
  c.reverse = 0;
  collx_layout_t l = build(c, {10, 2, 0});
  size_t b = 0, padded = 0, to = 0, bo = 0, cnt = 0;
  EXPECT_EQ(collx_layout_tensor_bucket(l, 0, &b, &padded), COLLX_OK);
  EXPECT_EQ(padded, 12u);
  EXPECT_EQ(collx_layout_tensor_shard(l, 0, 3, &to, &bo, &cnt), COLLX_OK);
  EXPECT_EQ(to, 9u);
  EXPECT_EQ(bo, 9u);
  EXPECT_EQ(cnt, 1u);
  EXPECT_EQ(collx_layout_tensor_shard(l, 0, 1, &to, &bo, &cnt), COLLX_OK);
  EXPECT_EQ(to, 3u);
  EXPECT_EQ(cnt, 3u);
  EXPECT_EQ(collx_layout_tensor_bucket(l, 1, &b, &padded), COLLX_OK);
  EXPECT_EQ(padded, 4u);
  EXPECT_EQ(offset_of(l, 1), 64u);
  EXPECT_EQ(collx_layout_tensor_shard(l, 1, 2, &to, &bo, &cnt), COLLX_OK);
  EXPECT_EQ(cnt, 0u);
  EXPECT_EQ(collx_layout_tensor_bucket(l, 2, &b, &padded), COLLX_OK);
  EXPECT_EQ(padded, 0u);
  EXPECT_EQ(collx_layout_owned(l, 0, 0, &to, &cnt), COLLX_ERR_INVALID_USAGE);
  collx_layout_destroy(l);
}

// Property test over random layouts: placement, buckets, ownership and shards.
TEST(ParallelLayout, RandomLayoutsPartitionExactly) {
  std::mt19937_64 rng(12345);
  auto pick = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 300; ++iter) {
    int32_t dp = static_cast<int32_t>(pick(1, 8));
    collx_layout_config_t c = config(dp);
    const size_t aligns[] = {0, 1, 8, 64};
    c.align_elems = aligns[pick(0, 3)];
    c.bucket_elems = pick(0, 1) ? pick(50, 5000) : 0;
    c.first_bucket_elems = pick(0, 1) ? pick(1, 2000) : 0;
    c.bucket_pad = pick(0, 1) ? static_cast<size_t>(dp) * pick(1, 40) : 0;
    c.reverse = static_cast<int32_t>(pick(0, 1));
    c.partition = pick(0, 2) == 0 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT;
    const bool flat = c.partition == COLLX_PART_FLAT;
    std::vector<size_t> sizes(pick(0, 30));
    for (auto& s : sizes) s = pick(0, 4) == 0 ? pick(0, 3) : pick(0, 3000);
    collx_layout_t l = build(c, sizes);
    SCOPED_TRACE("iteration " + std::to_string(iter));
    const size_t align = c.align_elems ? c.align_elems : 1;
    const size_t pad = c.bucket_pad ? c.bucket_pad : std::lcm(static_cast<size_t>(dp), size_t{128});
    size_t nb = 0, total = 0;
    ASSERT_EQ(collx_layout_num_buckets(l, &nb), COLLX_OK);
    ASSERT_EQ(collx_layout_total(l, &total), COLLX_OK);
    // Buckets tile the buffer.
    size_t expect_start = 0;
    std::vector<size_t> bs(nb), bp(nb), bn(nb);
    for (size_t b = 0; b < nb; ++b) {
      ASSERT_EQ(collx_layout_bucket(l, b, &bs[b], &bp[b], &bn[b]), COLLX_OK);
      EXPECT_EQ(bs[b], expect_start);
      EXPECT_EQ(bp[b] % pad, 0u);
      EXPECT_GE(bp[b], bn[b]);
      EXPECT_LT(bp[b] - bn[b], pad);
      expect_start = bs[b] + bp[b];
      if (flat) {  // owner ranges partition the padded bucket exactly
        size_t cursor = bs[b], sum = 0, first = 0;
        for (int32_t r = 0; r < dp; ++r) {
          size_t os = 0, oc = 0;
          ASSERT_EQ(collx_layout_owned(l, b, r, &os, &oc), COLLX_OK);
          EXPECT_EQ(os, cursor);
          if (r == 0) first = oc;
          EXPECT_EQ(oc, first);
          cursor += oc;
          sum += oc;
        }
        EXPECT_EQ(sum, bp[b]);
      }
    }
    EXPECT_EQ(total, expect_start);
    // Tensors: aligned, inside their bucket's data, in (reverse) order, no overlap; shards sum.
    size_t prev_end = 0;
    std::vector<size_t> bucket_last_end(nb, 0), bucket_prev_end(nb, 0), bucket_count(nb, 0);
    for (size_t k = 0; k < sizes.size(); ++k) {
      uint64_t id = c.reverse ? sizes.size() - 1 - k : k;
      size_t off = 0, n = 0, b = 0, padded = 0;
      ASSERT_EQ(collx_layout_tensor(l, id, &off, &n), COLLX_OK);
      ASSERT_EQ(collx_layout_tensor_bucket(l, id, &b, &padded), COLLX_OK);
      EXPECT_EQ(n, sizes[id]);
      EXPECT_EQ(off % align, 0u);
      EXPECT_GE(off, prev_end);
      EXPECT_EQ(padded, flat ? n : (n + dp - 1) / dp * dp);
      ASSERT_LT(b, nb);
      EXPECT_GE(off, bs[b]);
      EXPECT_LE(off + padded, bs[b] + bn[b]);
      bucket_prev_end[b] = bucket_last_end[b];
      bucket_last_end[b] = off + padded;
      ++bucket_count[b];
      prev_end = off + padded;
      size_t sum = 0, next_tensor_offset = 0;
      for (int32_t r = 0; r < dp; ++r) {
        size_t to = 0, bo = 0, cnt = 0;
        ASSERT_EQ(collx_layout_tensor_shard(l, id, r, &to, &bo, &cnt), COLLX_OK);
        EXPECT_EQ(bo, off + to);
        EXPECT_LE(to + cnt, n);
        if (cnt) {
          EXPECT_EQ(to, next_tensor_offset);  // shards are disjoint and in rank order
          next_tensor_offset = to + cnt;
          if (flat) {
            size_t os = 0, oc = 0;
            ASSERT_EQ(collx_layout_owned(l, b, r, &os, &oc), COLLX_OK);
            EXPECT_GE(bo, os);
            EXPECT_LE(bo + cnt, os + oc);
          } else {
            EXPECT_EQ(to, static_cast<size_t>(r) * (padded / dp));
          }
        }
        sum += cnt;
      }
      EXPECT_EQ(sum, n);
    }
    // Cut rule: a bucket closed by its limit reached it, and only with its last tensor.
    for (size_t b = 0; b + 1 < nb; ++b) {
      size_t limit = (b == 0 && c.first_bucket_elems) ? c.first_bucket_elems : c.bucket_elems;
      ASSERT_GT(limit, 0u);
      EXPECT_GE(bn[b], limit);
      if (bucket_count[b] >= 2) {
        EXPECT_LT(bucket_prev_end[b] - bs[b], limit);
      }
    }
    collx_layout_destroy(l);
  }
}

TEST(ParallelLayout, FingerprintIsStableAndSensitiveToEveryField) {
  auto fp = [](const collx_layout_config_t& c, const std::vector<std::array<uint64_t, 4>>& ts, bool fin) {
    collx_layout_t l = nullptr;
    EXPECT_EQ(collx_layout_create(&c, &l), COLLX_OK);
    for (const auto& t : ts)
      EXPECT_EQ(collx_layout_add(l, t[0], t[1], static_cast<collx_datatype_t>(t[2]), static_cast<uint32_t>(t[3])), COLLX_OK);
    if (fin) {
      EXPECT_EQ(collx_layout_finalize(l), COLLX_OK);
    }
    uint64_t f = 0;
    EXPECT_EQ(collx_layout_fingerprint(l, &f), COLLX_OK);
    collx_layout_destroy(l);
    return f;
  };
  const collx_layout_config_t base = [] {
    collx_layout_config_t c = config(4);
    c.bucket_elems = 1000;
    return c;
  }();
  const std::vector<std::array<uint64_t, 4>> ts = {{1, 100, COLLX_FLOAT32, 0}, {2, 200, COLLX_BFLOAT16, COLLX_TENSOR_TP_SHARDED}};
  uint64_t f0 = fp(base, ts, true);
  EXPECT_EQ(f0, fp(base, ts, true));
  EXPECT_EQ(f0, fp(base, ts, false));
  std::set<uint64_t> seen = {f0};
  auto differs = [&](uint64_t f, const char* what) { EXPECT_TRUE(seen.insert(f).second) << what; };
  collx_layout_config_t c;
  c = base; c.dp_size = 8; differs(fp(c, ts, true), "dp_size");
  c = base; c.reverse = 0; differs(fp(c, ts, true), "reverse");
  c = base; c.partition = COLLX_PART_PER_TENSOR; differs(fp(c, ts, true), "partition");
  c = base; c.align_elems = 128; differs(fp(c, ts, true), "align_elems");
  c = base; c.bucket_elems = 1001; differs(fp(c, ts, true), "bucket_elems");
  c = base; c.first_bucket_elems = 10; differs(fp(c, ts, true), "first_bucket_elems");
  c = base; c.bucket_pad = 256; differs(fp(c, ts, true), "bucket_pad");
  for (int field = 0; field < 4; ++field) {
    auto t = ts;
    t[1][field] += (field == 2) ? 1 : 3;
    differs(fp(base, t, true), "tensor field");
  }
  auto swapped = ts;
  std::swap(swapped[0], swapped[1]);
  differs(fp(base, swapped, true), "registration order");
  auto more = ts;
  more.push_back({3, 0, COLLX_FLOAT32, 0});
  differs(fp(base, more, true), "an extra zero-sized tensor");
}

TEST(ParallelLayout, ErrorsAreClear) {
  collx_layout_config_t c = config(0);
  collx_layout_t l = nullptr;
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_layout_last_error(nullptr)).find("dp_size is 0"), std::string::npos);
  c = config(3);
  c.bucket_pad = 128;  // not a multiple of 3
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_layout_last_error(nullptr)).find("not a multiple of dp_size"), std::string::npos);
  c = config(2);
  c.partition = 7;
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_ERR_INVALID_ARG);
  c = config(2);
  ASSERT_EQ(collx_layout_create(&c, &l), COLLX_OK);
  auto msg = [&] { return std::string(collx_layout_last_error(l)); };
  EXPECT_EQ(collx_layout_add(l, 7, 10, COLLX_FLOAT32, 0), COLLX_OK);
  EXPECT_EQ(collx_layout_add(l, 7, 10, COLLX_FLOAT32, 0), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("tensor 7 is already registered"), std::string::npos) << msg();
  EXPECT_EQ(collx_layout_add(l, 8, 10, static_cast<collx_datatype_t>(99), 0), COLLX_ERR_INVALID_ARG);
  size_t off = 0;
  EXPECT_EQ(collx_layout_tensor(l, 7, &off, nullptr), COLLX_ERR_INVALID_USAGE);
  EXPECT_NE(msg().find("not finalized"), std::string::npos) << msg();
  EXPECT_EQ(collx_layout_num_buckets(l, &off), COLLX_ERR_INVALID_USAGE);
  ASSERT_EQ(collx_layout_finalize(l), COLLX_OK);
  EXPECT_EQ(collx_layout_finalize(l), COLLX_ERR_INVALID_USAGE);
  EXPECT_EQ(collx_layout_add(l, 9, 10, COLLX_FLOAT32, 0), COLLX_ERR_INVALID_USAGE);
  EXPECT_NE(msg().find("after collx_layout_finalize"), std::string::npos) << msg();
  EXPECT_EQ(collx_layout_tensor(l, 99, &off, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("unknown tensor id 99"), std::string::npos) << msg();
  EXPECT_EQ(collx_layout_bucket(l, 5, &off, nullptr, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(collx_layout_owned(l, 0, 2, &off, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(msg().find("rank 2 is out of range"), std::string::npos) << msg();
  EXPECT_EQ(collx_layout_tensor_shard(l, 7, -1, nullptr, nullptr, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(collx_layout_tensor(l, 7, &off, nullptr), COLLX_OK);
  EXPECT_EQ(collx_layout_destroy(l), COLLX_OK);
  EXPECT_EQ(collx_layout_destroy(nullptr), COLLX_OK);
}

}  // namespace
