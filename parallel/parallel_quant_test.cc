// Quantized all-gather and reduce-scatter on 2 and 4 thread ranks: results within the
// documented bounds of the exact ones, all-gather results bit-identical on every rank,
// in-place forms, 16-bit datatypes, and refusals (bad op, datatype, overlap, a rank with
// another block size) that return errors instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "parallel/low_precision.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::PerRank;
using collx::testing::ThreadRanks;

collx_quant_config_t config(int bits, size_t block) {
  collx_quant_config_t c;
  collx_quant_config_init(&c, sizeof c);
  c.bits = bits;
  c.block_elems = block;
  c.timeout_ms = 20000;
  return c;
}

// Rank r's data: magnitudes that differ by block and by rank, so per-block scales matter.
std::vector<float> rank_data(int rank, size_t n) {
  std::mt19937 rng(static_cast<unsigned>(100 + rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>((i / 64 + rank) % 9) - 4);
  return x;
}

double block_scale(const float* x, size_t n, size_t i, size_t block, int bits) {
  double amax = 0;
  const size_t b0 = i / block * block;
  for (size_t k = b0; k < std::min(n, b0 + block); ++k) amax = std::max(amax, std::fabs(double(x[k])));
  return amax / (bits == 8 ? 127.0 : 7.0);
}

constexpr double kFactor = 1 + 0x1p-12;

TEST(QuantCollectives, AllGatherIsWithinHalfAScaleAndIdenticalOnEveryRank) {
  for (int world : {2, 4}) {
    ThreadRanks ranks(world, 20000);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (int bits : {8, 4}) {
      const size_t n = 1000, block = 64;  // partial last block
      PerRank<std::vector<float>> got(world);
      ranks.run([&](int rank, collx_comm_t comm) {
        const collx_quant_config_t c = config(bits, block);
        std::vector<float> x = rank_data(rank, n), out(n * world);
        ASSERT_EQ(collx_quant_allgather(x.data(), out.data(), n, COLLX_FLOAT32, comm, &c), COLLX_OK)
            << collx_last_error(nullptr);
        got.set(rank, out);
      });
      for (int r = 0; r < world; ++r) {
        const std::vector<float> x = rank_data(r, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_LE(std::fabs(x[i] - got[0][r * n + i]), kFactor * block_scale(x.data(), n, i, block, bits) / 2)
              << "world " << world << " bits " << bits << " rank " << r << " element " << i;
      }
      for (int r = 1; r < world; ++r)
        EXPECT_EQ(0, std::memcmp(got[0].data(), got[r].data(), n * world * 4)) << "rank " << r << " differs";
    }
  }
}

TEST(QuantCollectives, AllGatherInPlaceWithBfloat16) {
  const int world = 4;
  const size_t n = 300, block = 32;
  ThreadRanks ranks(world, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<uint16_t>> got(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    const collx_quant_config_t c = config(8, block);
    std::vector<uint16_t> buf(n * world, 0);
    const std::vector<float> x = rank_data(rank, n);
    collx::parallel::pack_half(x.data(), buf.data() + rank * n, n, 1.0f, COLLX_BFLOAT16);
    ASSERT_EQ(collx_quant_allgather(buf.data() + rank * n, buf.data(), n, COLLX_BFLOAT16, comm, &c), COLLX_OK)
        << collx_last_error(nullptr);
    got.set(rank, buf);
  });
  for (int r = 0; r < world; ++r) {
    std::vector<uint16_t> h(n);
    std::vector<float> x(n);
    const std::vector<float> raw = rank_data(r, n);
    collx::parallel::pack_half(raw.data(), h.data(), n, 1.0f, COLLX_BFLOAT16);
    for (size_t i = 0; i < n; ++i) x[i] = collx::parallel::bf16_to_float(h[i]);
    for (size_t i = 0; i < n; ++i) {
      const float y = collx::parallel::bf16_to_float(got[1][r * n + i]);
      ASSERT_LE(std::fabs(x[i] - y), kFactor * block_scale(x.data(), n, i, block, 8) / 2 + std::fabs(y) * 0x1p-8)
          << "rank " << r << " element " << i;
    }
  }
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[0], got[r]);
}

// Reduce-scatter against the exact sum in double: the documented bound (other ranks'
// half scales) plus float32 accumulation (world roundings of the running sum).
// transports: a COLLX_TRANSPORT_* mask, 0 = the default.
void check_reduce_scatter(int world, int bits, collx_op_t op, bool in_place, uint32_t transports = 0) {
  const size_t n = 777, block = 128;  // per rank; partial last block
  ThreadRanks ranks(world, 20000, transports);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> got(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    const collx_quant_config_t c = config(bits, block);
    std::vector<float> x = rank_data(rank, n * world), out(n);
    float* recv = in_place ? x.data() + rank * n : out.data();
    ASSERT_EQ(collx_quant_reduce_scatter(x.data(), recv, n, COLLX_FLOAT32, op, comm, &c), COLLX_OK)
        << collx_last_error(nullptr);
    got.set(rank, std::vector<float>(recv, recv + n));
  });
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(rank_data(r, n * world));
  const double div = op == COLLX_AVG ? world : 1;
  double worst = 0;
  for (int owner = 0; owner < world; ++owner) {
    for (size_t i = 0; i < n; ++i) {
      double exact = 0, bound = 0, mag = 0;
      for (int r = 0; r < world; ++r) {
        const float* chunk = inputs[r].data() + owner * n;
        exact += chunk[i];
        mag += std::fabs(double(chunk[i])) + block_scale(chunk, n, i, block, bits);
        if (r != owner) bound += kFactor * block_scale(chunk, n, i, block, bits) / 2;
      }
      const double err = std::fabs(got[owner][i] - exact / div);
      ASSERT_LE(err, (bound + world * mag * 0x1p-24) / div)
          << "world " << world << " bits " << bits << " owner " << owner << " element " << i;
      if (bound > 0) worst = std::max(worst, err / (bound / div));
    }
  }
  EXPECT_GT(worst, 0.05) << "quantization should be visible in the result";
}

TEST(QuantCollectives, ReduceScatterSumIsWithinTheStatedBound) {
  for (int world : {2, 4})
    for (int bits : {8, 4}) check_reduce_scatter(world, bits, COLLX_SUM, false);
}

TEST(QuantCollectives, ReduceScatterOverTcpSockets) {
  check_reduce_scatter(2, 8, COLLX_SUM, false, COLLX_TRANSPORT_TCP);
  check_reduce_scatter(4, 4, COLLX_AVG, true, COLLX_TRANSPORT_TCP);
}

TEST(QuantCollectives, ReduceScatterAvgInPlace) {
  check_reduce_scatter(4, 8, COLLX_AVG, true);
  check_reduce_scatter(2, 4, COLLX_AVG, true);
}

TEST(QuantCollectives, ReduceScatterFloat16WithinBound) {
  const int world = 2;
  const size_t n = 512, block = 256;
  ThreadRanks ranks(world, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::vector<float>> got(world), sent(world);
  ranks.run([&](int rank, collx_comm_t comm) {
    const collx_quant_config_t c = config(8, block);
    const std::vector<float> raw = rank_data(rank, n * world);
    std::vector<uint16_t> h(n * world), out(n);
    std::vector<float> x(n * world), y(n);
    collx::parallel::pack_half(raw.data(), h.data(), h.size(), 1.0f, COLLX_FLOAT16);
    collx::parallel::unpack_half(h.data(), x.data(), h.size(), 1.0f, COLLX_FLOAT16);
    ASSERT_EQ(collx_quant_reduce_scatter(h.data(), out.data(), n, COLLX_FLOAT16, COLLX_SUM, comm, &c), COLLX_OK)
        << collx_last_error(nullptr);
    collx::parallel::unpack_half(out.data(), y.data(), n, 1.0f, COLLX_FLOAT16);
    got.set(rank, y);
    sent.set(rank, x);
  });
  for (int owner = 0; owner < world; ++owner)
    for (size_t i = 0; i < n; ++i) {
      const float* other = sent[1 - owner].data() + owner * n;
      const double exact = double(sent[owner][owner * n + i]) + other[i];
      const double bound = kFactor * block_scale(other, n, i, block, 8) / 2 + std::fabs(exact) * 0x1p-10;
      ASSERT_LE(std::fabs(got[owner][i] - exact), bound) << "owner " << owner << " element " << i;
    }
}

TEST(QuantCollectives, BadCallsReturnNamedErrorsOnEveryRank) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    (void)rank;
    const collx_quant_config_t c = config(8, 256);
    std::vector<float> x(64, 1.0f), y(128);
    EXPECT_EQ(collx_quant_reduce_scatter(y.data(), x.data(), 64, COLLX_FLOAT32, COLLX_MAX, comm, &c),
              COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("op max is not supported"), std::string::npos)
        << collx_last_error(nullptr);
    EXPECT_EQ(collx_quant_allgather(x.data(), y.data(), 64, COLLX_INT8, comm, &c), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("datatype int8 cannot be quantized"), std::string::npos);
    // Overlapping but not the in-place form.
    EXPECT_EQ(collx_quant_allgather(y.data() + 1, y.data(), 64, COLLX_FLOAT32, comm, &c), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("in-place form"), std::string::npos);
    EXPECT_EQ(collx_quant_reduce_scatter(y.data(), y.data() + 3, 64, COLLX_FLOAT32, COLLX_SUM, comm, &c),
              COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_quant_allgather(x.data(), y.data(), 64, COLLX_FLOAT32, nullptr, &c), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("comm is NULL"), std::string::npos);
    // The communicator is still usable; empty calls are fine.
    EXPECT_EQ(collx_quant_allgather(x.data(), y.data(), 64, COLLX_FLOAT32, comm, &c), COLLX_OK)
        << collx_last_error(nullptr);
    EXPECT_EQ(collx_quant_allgather(nullptr, nullptr, 0, COLLX_FLOAT32, comm, &c), COLLX_OK);
    EXPECT_EQ(collx_quant_reduce_scatter(nullptr, nullptr, 0, COLLX_BFLOAT16, COLLX_AVG, comm, nullptr), COLLX_OK);
  });
}

TEST(QuantCollectives, AMissingRankEndsByTheConfiguredDeadline) {
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.run([&](int rank, collx_comm_t comm) {
    if (rank == 1) return;  // never joins
    collx_quant_config_t c = config(8, 256);
    c.timeout_ms = 300;
    std::vector<float> x(64, 1.0f), y(128);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(collx_quant_allgather(x.data(), y.data(), 64, COLLX_FLOAT32, comm, &c), COLLX_ERR_TIMEOUT);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("collx_quant_allgather"), std::string::npos)
        << collx_last_error(nullptr);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  });
}

TEST(QuantCollectives, ARankWithAnotherBlockSizeIsNamedNotDecoded) {
  // 16 elements in one block of 16 or 32: the messages have the same length, so only
  // the header tells them apart.
  ThreadRanks ranks(2, 20000);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  PerRank<std::string> msg(2);
  ranks.run([&](int rank, collx_comm_t comm) {
    const collx_quant_config_t c = config(8, rank == 0 ? 16 : 32);
    std::vector<float> x(16, 1.0f), y(32);
    EXPECT_EQ(collx_quant_allgather(x.data(), y.data(), 16, COLLX_FLOAT32, comm, &c), COLLX_ERR_MISMATCH);
    msg.set(rank, collx_last_error(nullptr));
    std::vector<float> big(32, 1.0f), part(16);
    EXPECT_EQ(collx_quant_reduce_scatter(big.data(), part.data(), 16, COLLX_FLOAT32, COLLX_SUM, comm, &c),
              COLLX_ERR_MISMATCH);
  });
  EXPECT_NE(msg[0].find("message from rank 1 does not match: it holds int8, block_elems 32"), std::string::npos)
      << msg[0];
  EXPECT_NE(msg[1].find("message from rank 0 does not match: it holds int8, block_elems 16"), std::string::npos)
      << msg[1];
}

}  // namespace
