// All-gatherv with uneven blocks (empty ones included, MoE-style growing shards), packed or
// placed by displs with gaps in reverse rank order, in place, blocking and nonblocking, on
// every world size and transport: every block equals the reference and the gaps between
// blocks are left untouched. Ranks passing different recvcounts get a mismatch, and bad
// arrays are rejected naming what is wrong.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tests/fast/sweep.h"
#include "tests/fast/v_test_util.h"
#include "tests/support/reference.h"

namespace collx {
namespace testing {
namespace {

constexpr unsigned char kPoison = 0xAB;

enum class Layout { kPacked, kReversedWithGaps, kInPlace };

struct VCase {
  std::vector<size_t> counts;
  Layout layout = Layout::kPacked;
  collx_datatype_t datatype = COLLX_INT32;
  bool nonblocking = false;
  std::string name;
};

// displs for the layout; empty means "pass NULL" (packed in rank order).
std::vector<size_t> displs_for(const VCase& c) {
  const size_t n = c.counts.size();
  std::vector<size_t> displs(n, 0);
  if (c.layout == Layout::kReversedWithGaps) {
    size_t at = 3;  // a gap before the first block too
    for (size_t r = n; r-- > 0;) {
      displs[r] = at;
      at += c.counts[r] + 2;
    }
    return displs;
  }
  if (c.layout == Layout::kPacked) return {};
  for (size_t r = 1; r < n; ++r) displs[r] = displs[r - 1] + c.counts[r - 1];
  return displs;
}

// Runs the case on every rank; returns the number of wrong elements (gaps included).
size_t run_allgatherv(ThreadRanks& world, const VCase& c) {
  const size_t n = static_cast<size_t>(world.size());
  const size_t elem = collx_datatype_size(c.datatype);
  const std::vector<size_t> displs = displs_for(c);
  std::vector<size_t> placed = displs;  // where each block goes, NULL or not
  if (placed.empty()) {
    placed.assign(n, 0);
    for (size_t r = 1; r < n; ++r) placed[r] = placed[r - 1] + c.counts[r - 1];
  }
  size_t extent = 0;
  for (size_t r = 0; r < n; ++r) extent = std::max(extent, placed[r] + c.counts[r]);
  std::atomic<size_t> wrong_total{0};
  world.run([&](int rank, collx_comm_t comm) {
    const size_t me = static_cast<size_t>(rank);
    std::vector<unsigned char> recv(extent * elem + 16, kPoison);
    std::vector<unsigned char> send(c.counts[me] * elem + 16, 0);
    void* send_ptr = send.data();
    if (c.layout == Layout::kInPlace) send_ptr = recv.data() + placed[me] * elem;
    fill_input(send_ptr, c.counts[me], 0, rank, COLLX_SUM, c.datatype);
    const size_t* displs_arg = displs.empty() ? nullptr : displs.data();
    collx_status_t rc;
    if (c.nonblocking) {
      collx_request_t req = nullptr;
      rc = collx_iallgatherv(send_ptr, c.counts[me], recv.data(), c.counts.data(), displs_arg, c.datatype, comm, nullptr,
                             &req);
      if (rc == COLLX_OK) {
        rc = collx_wait(req, -1);
        collx_request_free(req);
      }
    } else {
      rc = collx_allgatherv(send_ptr, c.counts[me], recv.data(), c.counts.data(), displs_arg, c.datatype, comm, nullptr);
    }
    if (rc != COLLX_OK) {
      ADD_FAILURE() << c.name << " rank " << rank << ": " << collx_status_name(rc) << ": " << collx_last_error(comm);
      wrong_total += extent + 1;
      return;
    }
    std::vector<bool> covered(extent, false);
    size_t wrong = 0;
    for (size_t q = 0; q < n; ++q) {
      for (size_t i = 0; i < c.counts[q]; ++i) {
        covered[placed[q] + i] = true;
        const double got = load_value(recv.data(), placed[q] + i, c.datatype);
        if (!values_match(input_value(static_cast<int>(q), i, COLLX_SUM, c.datatype), got, c.datatype, COLLX_SUM)) {
          if (wrong++ == 0) ADD_FAILURE() << c.name << " rank " << rank << ": block " << q << " element " << i;
        }
      }
    }
    for (size_t e = 0; e < extent; ++e) {
      if (covered[e]) continue;
      for (size_t b = 0; b < elem; ++b) {
        if (recv[e * elem + b] != kPoison) {
          if (wrong++ == 0) ADD_FAILURE() << c.name << " rank " << rank << ": gap element " << e << " was written";
          break;
        }
      }
    }
    wrong_total += wrong;
  });
  return wrong_total.load();
}

std::vector<VCase> cases_for(int size) {
  const size_t n = static_cast<size_t>(size);
  std::vector<VCase> out;
  auto add = [&](const std::string& what, std::vector<size_t> counts) {
    for (collx_datatype_t dt : {COLLX_UINT8, COLLX_BFLOAT16, COLLX_INT32, COLLX_FLOAT64}) {
      for (Layout layout : {Layout::kPacked, Layout::kReversedWithGaps, Layout::kInPlace}) {
        VCase c;
        c.counts = counts;
        c.layout = layout;
        c.datatype = dt;
        c.nonblocking = layout == Layout::kReversedWithGaps && dt == COLLX_INT32;
        c.name = what + "/" + collx_datatype_name(dt) + "/layout" + std::to_string(static_cast<int>(layout)) +
                 (c.nonblocking ? "/nonblocking" : "");
        out.push_back(c);
      }
    }
  };
  std::vector<size_t> uneven(n), first_empty(n), zeros(n, 0), moe(n);
  for (size_t r = 0; r < n; ++r) {
    uneven[r] = (r * 5 + 3) % 7;              // 3 1 6 4 2 0 5 3: one empty block at 6+ ranks
    first_empty[r] = r == 0 ? 0 : 1000 + r;   // rank 0 routes no tokens
    moe[r] = (size_t{1} << 15) * (r + 1) + r;  // growing shards: large messages, rendezvous
  }
  add("uneven", uneven);
  add("first_empty", first_empty);
  add("all_empty", zeros);
  VCase large;
  large.counts = moe;
  large.layout = Layout::kReversedWithGaps;
  large.datatype = COLLX_FLOAT32;
  large.name = "moe_large/float32";
  out.push_back(large);
  return out;
}

COLLX_V_SWEEP_TEST(AllgathervSweep, UnevenBlocksMatchReferenceAndGapsStayUntouched, cases_for(world.size()), run_allgatherv);

TEST(AllgathervMismatch, DifferentRecvcountsFailInsteadOfReceivingWrongSizes) {
  const RankOutcomes o = run_expecting_quick_failure(3, [](int rank, collx_comm_t comm) {
    // Rank 2 believes rank 0 sends 5 elements; rank 0 sends 4. Same total, same own count.
    std::vector<size_t> counts = {4, 2, 3};
    if (rank == 2) counts = {5, 1, 3};
    std::vector<int32_t> send(8, rank), recv(16, -1);
    return collx_allgatherv(send.data(), counts[rank], recv.data(), counts.data(), nullptr, COLLX_INT32, comm, nullptr);
  });
  EXPECT_TRUE(some_rank_named_mismatch(o, "allgatherv", "counts hash"));
}

TEST(AllgathervBadInput, EachBadArrayIsNamedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(64, 1.0f);
  const size_t counts[2] = {4, 4};
  const size_t overlapping[2] = {0, 2};
  const size_t huge[2] = {4, SIZE_MAX - 1};
  const std::vector<BadCall> cases = {
      {"null recvcounts", [&] { return collx_allgatherv(buf.data(), 4, buf.data() + 16, nullptr, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvcounts is NULL"},
      {"sendcount differs", [&] { return collx_allgatherv(buf.data(), 3, buf.data() + 16, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvcounts[0]"},
      {"overlapping blocks", [&] { return collx_allgatherv(buf.data(), 4, buf.data() + 16, counts, overlapping, COLLX_FLOAT32, comm, nullptr); }, "overlap"},
      {"block past size_t", [&] { return collx_allgatherv(buf.data(), 4, buf.data() + 16, huge, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvcounts[1]"},
      {"null recvbuf", [&] { return collx_allgatherv(buf.data(), 4, nullptr, counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "recvbuf"},
      {"bad in place", [&] { return collx_allgatherv(buf.data() + 1, 4, buf.data(), counts, nullptr, COLLX_FLOAT32, comm, nullptr); }, "in place"},
      {"unknown datatype", [&] { return collx_allgatherv(buf.data(), 4, buf.data() + 16, counts, nullptr, static_cast<collx_datatype_t>(77), comm, nullptr); }, "datatype"},
  };
  expect_rejected(comm, cases);
  world.run([&](int rank, collx_comm_t each) {
    int32_t mine = rank + 1;
    int32_t all[2] = {0, 0};
    const size_t ones[2] = {1, 1};
    ASSERT_EQ(collx_allgatherv(&mine, 1, all, ones, nullptr, COLLX_INT32, each, nullptr), COLLX_OK)
        << collx_last_error(each);
    EXPECT_EQ(all[0], 1);
    EXPECT_EQ(all[1], 2);
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
