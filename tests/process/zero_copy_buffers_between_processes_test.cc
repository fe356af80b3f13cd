// Buffers from collx_mem_alloc between processes on one host: the shared-memory collectives
// map the peers' buffers and reduce or copy straight from them. Results match the reference
// whether every rank, some ranks or no rank uses such buffers, in place or not, on the
// boards' sizes and on the in-place-read sizes, and when buffers are freed and new ones
// allocated between calls (the mappings peers cached must not serve stale pages).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/support/process_ranks.h"
#include "tests/support/reference.h"

namespace collx {
namespace testing {
namespace {

// A buffer from collx_mem_alloc or from the heap.
class TestBuffer {
 public:
  TestBuffer(size_t bytes, bool zero_copy) : zero_copy_(zero_copy) {
    if (zero_copy_) {
      if (collx_mem_alloc(bytes, &data_) != COLLX_OK) data_ = nullptr;
    } else {
      heap_.resize(bytes);
      data_ = heap_.data();
    }
  }
  ~TestBuffer() {
    if (zero_copy_ && data_ != nullptr) collx_mem_free(data_);
  }
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }

 private:
  bool zero_copy_;
  void* data_ = nullptr;
  std::vector<unsigned char> heap_;
};

enum class Who { kEveryRank, kEvenRanks };

int check_collectives(int rank, int size, collx_comm_t comm, bool zero_copy, int iteration) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.algorithm = COLLX_ALGO_SHARED_MEMORY;
  // 1000: through the boards; 300000 (over 64 KiB per peer): peers' buffers read in place.
  for (size_t count : {size_t{1000}, size_t{300000}}) {
    for (collx_datatype_t dt : {COLLX_FLOAT32, COLLX_INT64, COLLX_BFLOAT16}) {
      const size_t elem = collx_datatype_size(dt), n = static_cast<size_t>(size);
      TestBuffer send(count * n * elem, zero_copy), recv(count * n * elem, zero_copy);
      COLLX_CHILD_CHECK(send.data() && recv.data(), "collx_mem_alloc: %s", collx_last_error(nullptr));
      // all-reduce, out of place then in place
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt, iteration);
      collx_status_t rc = collx_allreduce(send.data(), recv.data(), count, dt, COLLX_SUM, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allreduce: %s", collx_last_error(comm));
      for (size_t i = 0; i < count; ++i) {
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == reference_reduce(COLLX_SUM, dt, size, i, 1.0, iteration),
                          "allreduce count %zu element %zu", count, i);
      }
      fill_input(recv.data(), count, 0, rank, COLLX_MAX, dt, iteration);
      rc = collx_allreduce(recv.data(), recv.data(), count, dt, COLLX_MAX, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allreduce in place: %s", collx_last_error(comm));
      for (size_t i = 0; i < count; ++i) {
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == reference_reduce(COLLX_MAX, dt, size, i, 1.0, iteration),
                          "allreduce in place count %zu element %zu", count, i);
      }
      // reduce-scatter, out of place then in place
      fill_input(send.data(), count * n, 0, rank, COLLX_SUM, dt, iteration);
      rc = collx_reduce_scatter(send.data(), recv.data(), count, dt, COLLX_SUM, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "reduce_scatter: %s", collx_last_error(comm));
      for (size_t i = 0; i < count; ++i) {
        const size_t at = static_cast<size_t>(rank) * count + i;
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == reference_reduce(COLLX_SUM, dt, size, at, 1.0, iteration),
                          "reduce_scatter count %zu element %zu", count, i);
      }
      rc = collx_reduce_scatter(send.data(), send.data() + rank * count * elem, count, dt, COLLX_SUM, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "reduce_scatter in place: %s", collx_last_error(comm));
      COLLX_CHILD_CHECK(std::memcmp(send.data() + rank * count * elem, recv.data(), count * elem) == 0,
                        "reduce_scatter in place differs from out of place (count %zu)", count);
      // all-gather, out of place then in place
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt, iteration);
      rc = collx_allgather(send.data(), recv.data(), count, dt, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allgather: %s", collx_last_error(comm));
      for (int q = 0; q < size; ++q) {
        for (size_t i = 0; i < count; i += 3) {
          COLLX_CHILD_CHECK(load_value(recv.data(), q * count + i, dt) == input_value(q, i, COLLX_SUM, dt, iteration),
                            "allgather count %zu block %d element %zu", count, q, i);
        }
      }
      std::memset(send.data(), 0, count * n * elem);
      fill_input(send.data() + rank * count * elem, count, 0, rank, COLLX_SUM, dt, iteration);
      rc = collx_allgather(send.data() + rank * count * elem, send.data(), count, dt, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allgather in place: %s", collx_last_error(comm));
      COLLX_CHILD_CHECK(std::memcmp(send.data(), recv.data(), count * n * elem) == 0,
                        "allgather in place differs from out of place (count %zu)", count);
    }
  }
  return 0;
}

int run_with(Who who, int rank, int size, collx_comm_t comm) {
  const bool zero_copy = who == Who::kEveryRank || rank % 2 == 0;
  // Fresh buffers every iteration, more of them than a peer keeps mapped: freed memory may
  // come back at the same address in a new memory file, and peers must read the new one.
  for (int iteration = 0; iteration < 6; ++iteration) {
    if (int rc = check_collectives(rank, size, comm, zero_copy, iteration)) return rc;
  }
  return 0;
}

TEST(ZeroCopyBuffers, SharedMemoryCollectivesAreCorrectWhenEveryRankUsesThem) {
  for (int size : {2, 3, 4}) {
    SCOPED_TRACE("world size " + std::to_string(size));
    auto results = run_comm_processes(
        size, 240000, [](int rank, int n, collx_comm_t comm) { return run_with(Who::kEveryRank, rank, n, comm); },
        60000, COLLX_TRANSPORT_SHM);
    for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  }
}

TEST(ZeroCopyBuffers, SharedMemoryCollectivesAreCorrectWhenOnlySomeRanksUseThem) {
  auto results = run_comm_processes(
      3, 240000, [](int rank, int n, collx_comm_t comm) { return run_with(Who::kEvenRanks, rank, n, comm); }, 60000,
      COLLX_TRANSPORT_SHM);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

}  // namespace
}  // namespace testing
}  // namespace collx
