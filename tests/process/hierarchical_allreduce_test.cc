// Hierarchical all-reduce between real processes on fake hosts: COLLX_TEST_HOST_ID (test only)
// gives ranks different host identities on this one machine, so the world communicator spans
// "hosts" (TCP over loopback) while each host's child communicator uses shared memory.
// Layouts: 2 hosts x 2 ranks, 2 x 3, unequal 3 + 1, and hosts interleaved in rank order.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lib/core/host_identity.h"
#include "tests/support/killed_rank.h"
#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"
#include "tests/support/reference.h"

namespace collx {
namespace testing {
namespace {

// Forks one process per label ("a,a,b,b": ranks 0,1 on host a, 2,3 on host b), each creating
// the world communicator with COLLX_TEST_HOST_ID set and extra environment `env` (NAME=VALUE;...).
std::vector<RankResult> run_on_fake_hosts(const std::string& labels, int timeout_ms, const std::string& env,
                                          const std::function<int(int rank, int size, collx_comm_t comm)>& body,
                                          int64_t comm_timeout_ms = 60000) {
  const int size = static_cast<int>(std::count(labels.begin(), labels.end(), ',')) + 1;
  std::deque<std::string> names;  // ScopedEnv keeps a pointer to its name
  std::vector<std::unique_ptr<ScopedEnv>> vars;
  vars.push_back(std::make_unique<ScopedEnv>("COLLX_TEST_HOST_ID", labels));
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find(';', start);
    if (end == std::string::npos) end = env.size();
    const std::string kv = env.substr(start, end - start);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) {
      names.push_back(kv.substr(0, eq));
      vars.push_back(std::make_unique<ScopedEnv>(names.back().c_str(), kv.substr(eq + 1)));
    }
    start = end + 1;
  }
  return run_comm_processes(size, timeout_ms, body, comm_timeout_ms);
}

// One all-reduce case against the reference; 0 when right, else prints the first wrong element.
int check_case(int rank, int size, collx_comm_t comm, collx_datatype_t dt, collx_op_t op, size_t count, bool in_place,
               int32_t algorithm, bool nonblocking = false) {
  const size_t element = collx_datatype_size(dt);
  std::vector<char> send(count * element + 1), recv(count * element + 1);
  fill_input(send.data(), count, 0, rank, op, dt);
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.algorithm = algorithm;
  opts.premul_scalar = 2.0;
  void* out = in_place ? send.data() : recv.data();
  collx_status_t rc;
  if (nonblocking) {
    collx_request_t request = nullptr;
    rc = collx_iallreduce(send.data(), out, count, dt, op, comm, &opts, &request);
    if (rc == COLLX_OK) rc = collx_wait(request, -1);
    if (request) collx_request_free(request);
  } else {
    rc = collx_allreduce(send.data(), out, count, dt, op, comm, &opts);
  }
  const std::string name = case_name(dt, op, count, in_place);
  COLLX_CHILD_CHECK(rc == COLLX_OK, "rank %d %s: %s: %s", rank, name.c_str(), collx_status_name(rc),
                    collx_last_error(comm));
  for (size_t i = 0; i < count; ++i) {
    const double expected = reference_reduce(op, dt, size, i, 2.0);
    const double got = load_value(out, i, dt);
    COLLX_CHILD_CHECK(values_match(expected, got, dt, op), "rank %d %s: element %zu is %g, expected %g", rank,
                      name.c_str(), i, got, expected);
  }
  return 0;
}

// Every datatype and op at small counts (0, 1, below the ranks per host, not divisible by
// them), in and out of place; a few pairs at 1M elements; one nonblocking call.
int sweep(int rank, int size, collx_comm_t comm, int32_t algorithm) {
  const size_t counts[] = {0, 1, 2, 7, 1001};
  for (int t = 0; t < COLLX_NUM_DATATYPES; ++t) {
    for (int o = 0; o < COLLX_NUM_OPS; ++o) {
      for (size_t count : counts) {
        for (bool in_place : {false, true}) {
          int rc = check_case(rank, size, comm, static_cast<collx_datatype_t>(t), static_cast<collx_op_t>(o), count,
                              in_place, algorithm);
          if (rc != 0) return rc;
        }
      }
    }
  }
  const struct { collx_datatype_t dt; collx_op_t op; } large[] = {
      {COLLX_FLOAT32, COLLX_SUM}, {COLLX_BFLOAT16, COLLX_AVG}, {COLLX_INT8, COLLX_MAX}, {COLLX_FLOAT64, COLLX_PREMUL_SUM}};
  for (const auto& c : large) {
    for (bool in_place : {false, true}) {
      int rc = check_case(rank, size, comm, c.dt, c.op, (1u << 20) + 3, in_place, algorithm);
      if (rc != 0) return rc;
    }
  }
  return check_case(rank, size, comm, COLLX_FLOAT32, COLLX_SUM, 100003, false, algorithm, /*nonblocking=*/true);
}

// Inputs whose sums round (random floats): every rank must still get the same bits.
struct Digests {
  uint64_t of[8][4];
};

int same_bits_everywhere(int rank, collx_comm_t comm, Digests* shared) {
  const collx_datatype_t types[] = {COLLX_FLOAT32, COLLX_FLOAT16, COLLX_BFLOAT16, COLLX_FLOAT64};
  for (int k = 0; k < 4; ++k) {
    const collx_datatype_t dt = types[k];
    const size_t count = 300007, element = collx_datatype_size(dt);
    std::vector<char> buf(count * element);
    uint64_t x = 88172645463325252ull + static_cast<uint64_t>(rank) * 1000003u;
    for (size_t i = 0; i < count; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      store_value(buf.data(), i, dt, static_cast<double>(x % 2000001) / 1000.0 - 1000.0 + 1.0 / 3.0);
    }
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.algorithm = COLLX_ALGO_HIERARCHICAL;
    collx_status_t rc = collx_allreduce(buf.data(), buf.data(), count, dt, COLLX_SUM, comm, &opts);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "%s", collx_last_error(comm));
    shared->of[rank][k] = fnv1a64(buf.data(), buf.size());
  }
  return 0;
}

struct Layout {
  const char* name;
  const char* labels;
};

class Hierarchical : public ::testing::TestWithParam<Layout> {};

TEST_P(Hierarchical, EveryDatatypeOpAndCountMatchesTheReferenceWithTheSameBitsOnEveryRank) {
  auto* shared = static_cast<Digests*>(
      mmap(nullptr, sizeof(Digests), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  std::memset(shared, 0, sizeof *shared);
  const std::string labels = GetParam().labels;
  auto results = run_on_fake_hosts(labels, 400000, "", [shared](int rank, int size, collx_comm_t comm) {
    int rc = sweep(rank, size, comm, COLLX_ALGO_HIERARCHICAL);
    if (rc != 0) return rc;
    return same_bits_everywhere(rank, comm, shared);
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  for (size_t r = 1; r < results.size(); ++r) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(shared->of[r][k], shared->of[0][k]) << "rank " << r << " type " << k;
  }
  munmap(shared, sizeof *shared);
}

INSTANTIATE_TEST_SUITE_P(FakeHosts, Hierarchical,
                         ::testing::Values(Layout{"TwoHostsOfTwo", "a,a,b,b"}, Layout{"TwoHostsOfThree", "a,a,a,b,b,b"},
                                           Layout{"UnequalThreeAndOne", "a,a,a,b"}),
                         [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

// Hosts interleaved in rank order, the choice made by a COLLX_ALGO rule (the children must
// not inherit it), and auto calls mixed in: results still right, and explain lists it.
TEST(HierarchicalRules, InterleavedHostsUnderACollxAlgoRuleAndExplain) {
  auto results = run_on_fake_hosts("a,b,a,b", 300000, "COLLX_ALGO=allreduce:hierarchical",
                                   [](int rank, int size, collx_comm_t comm) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{4099}, size_t{1} << 20}) {
      for (bool in_place : {false, true}) {
        int rc = check_case(rank, size, comm, COLLX_FLOAT32, COLLX_SUM, count, in_place, COLLX_ALGO_AUTO);
        if (rc != 0) return rc;
        rc = check_case(rank, size, comm, COLLX_INT32, COLLX_AVG, count, in_place, COLLX_ALGO_AUTO);
        if (rc != 0) return rc;
      }
    }
    char text[4096];
    size_t len = sizeof text;
    collx_status_t rc = collx_explain(comm, COLLX_COLL_ALLREDUCE, 1 << 20, COLLX_FLOAT32, text, &len);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "explain: %s", collx_last_error(comm));
    COLLX_CHILD_CHECK(strstr(text, "chosen: hierarchical (COLLX_ALGO rule") != nullptr, "%s", text);
    COLLX_CHILD_CHECK(strstr(text, "hosts: 2, up to 2 ranks each") != nullptr, "%s", text);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

TEST(HierarchicalRules, ExplainOffersItOnlyWhenRanksSpanHostsWithASharedHost) {
  auto multi = run_on_fake_hosts("a,a,b,b", 120000, "", [](int, int, collx_comm_t comm) {
    char text[4096];
    size_t len = sizeof text;
    collx_status_t rc = collx_explain(comm, COLLX_COLL_ALLREDUCE, 16 << 20, COLLX_FLOAT32, text, &len);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "explain: %s", collx_last_error(comm));
    COLLX_CHILD_CHECK(strstr(text, "  hierarchical ") != nullptr, "not a candidate:\n%s", text);
    COLLX_CHILD_CHECK(strstr(text, "over shm") != nullptr, "%s", text);
    return 0;
  });
  for (const RankResult& r : multi) EXPECT_EQ(r.exit_code, 0) << describe(multi);
  // One rank per host, and one host: not a candidate; forcing it still works (ring).
  for (const char* labels : {"a,b,c", "a,a,a"}) {
    auto results = run_on_fake_hosts(labels, 120000, "", [](int rank, int size, collx_comm_t comm) {
      char text[4096];
      size_t len = sizeof text;
      collx_status_t rc = collx_explain(comm, COLLX_COLL_ALLREDUCE, 16 << 20, COLLX_FLOAT32, text, &len);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "explain: %s", collx_last_error(comm));
      COLLX_CHILD_CHECK(strstr(text, "hierarchical") == nullptr, "offered:\n%s", text);
      for (size_t count : {size_t{1}, size_t{1000}}) {
        int code = check_case(rank, size, comm, COLLX_FLOAT32, COLLX_SUM, count, false, COLLX_ALGO_HIERARCHICAL);
        if (code != 0) return code;
      }
      return 0;
    });
    for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << labels << "\n" << describe(results);
  }
}

// A rank killed mid all-reduce: every survivor fails, within the usual two seconds, though
// most of them wait in a child communicator that does not contain the dead rank.
TEST(HierarchicalFailure, AKilledRankFailsEverySurvivorWithinTwoSeconds) {
  ScopedEnv hosts("COLLX_TEST_HOST_ID", "a,a,b,b");
  expect_survivors_see_killed_rank(/*mask=*/0, COLLX_ALGO_HIERARCHICAL);
}

// Ranks disagreeing about the algorithm of their first hierarchical call fail with a
// mismatch (the parent barrier before the children are made compares OpDescs), not a timeout.
TEST(HierarchicalFailure, ADifferentAlgorithmOnOneRankIsAMismatchNotAHang) {
  auto results = run_on_fake_hosts(
      "a,a,b,b", 60000, "",
      [](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(1000, 1.0f);
        collx_opts_t opts;
        collx_opts_init(&opts, sizeof opts);
        opts.algorithm = rank == 0 ? COLLX_ALGO_RING : COLLX_ALGO_HIERARCHICAL;
        const int64_t start = now_us();
        collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, &opts);
        const double seconds = (now_us() - start) / 1e6;
        COLLX_CHILD_CHECK(rc == COLLX_ERR_MISMATCH || rc == COLLX_ERR_REMOTE, "rank %d: %s: %s", rank,
                          collx_status_name(rc), collx_last_error(comm));
        COLLX_CHILD_CHECK(seconds < 5.0, "rank %d failed only after %.1f s", rank, seconds);
        return 0;
      },
      /*comm_timeout_ms=*/30000);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

}  // namespace
}  // namespace testing
}  // namespace collx
