// A rank that skips a collective, and the flight records its peers leave: the failure
// scenario the flight recorder test and the remote cause test share (each checks its own
// things about it).
//
// Three forked ranks, each with COLLX_FR_DIR set to `fr_dir`, run one all-reduce of 1000
// floats together. Then rank 2 skips the second all-reduce while ranks 0 and 1 enter it and
// wait for rank 2 in vain, until a deadline fails them: their own (COLLX_ERR_TIMEOUT) or the
// other waiting rank's, which reaches them as COLLX_ERR_REMOTE. Rank 2 does not leave
// meanwhile (leaving would fail its peers with "rank 2 left" instead of a timeout): it stays
// until the flight records of `skipper_waits_for` are in `fr_dir`, or it gives up, then
// optionally dumps its own record on demand, and exits 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collx/collx.h"
#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"
#include "tests/support/temp_dir.h"

namespace collx {
namespace testing {

struct SkippedCollective {
  std::string fr_dir;                  // COLLX_FR_DIR of every rank: where the records land
  int64_t comm_timeout_ms = 30000;     // the communicator's deadline (of every blocking call)
  uint32_t transports = 0;             // COLLX_TRANSPORT_* mask; 0: the default
  int64_t rank0_timeout_ms = -1;       // rank 0's deadline for the second all-reduce; -1: the communicator's
  std::vector<int> skipper_waits_for;  // the ranks whose record (fr_dir/rank<r>.json) rank 2 waits for
  int skipper_gives_up_after_s = 30;   // how long rank 2 waits at most
  bool skipper_dumps = false;          // rank 2 then dumps its own record (collx_comm_dump_flight_record)
  // In the child of rank 0 or 1: checks the status of its second all-reduce (and whatever
  // else should hold right after it). Returns the child's exit code: 0 when right, else
  // through COLLX_CHILD_CHECK.
  std::function<int(int rank, collx_status_t rc, collx_comm_t comm)> check_waiting_rank;
};

// Runs the scenario above; the results of ranks 0, 1 and 2 (every one exit code 0 when all
// went as it should).
inline std::vector<RankResult> run_skipped_collective(const SkippedCollective& s) {
  ScopedEnv fr_dir("COLLX_FR_DIR", s.fr_dir);
  return run_comm_processes(
      3, 60000,
      [&s](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(1000, 1.0f);
        collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_OK, "first allreduce: %s", collx_last_error(comm));
        if (rank == 2) {
          // Skips the second all-reduce and stays until the records it waits for are written.
          auto all_written = [&s] {
            for (int r : s.skipper_waits_for) {
              if (!exists(s.fr_dir + "/rank" + std::to_string(r) + ".json")) return false;
            }
            return true;
          };
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(s.skipper_gives_up_after_s);
          while (!all_written() && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          if (s.skipper_dumps) {
            rc = collx_comm_dump_flight_record(comm, nullptr);
            COLLX_CHILD_CHECK(rc == COLLX_OK, "dump: %s", collx_last_error(comm));
          }
          return 0;
        }
        collx_opts_t opts;
        collx_opts_init(&opts, sizeof opts);
        if (rank == 0) opts.timeout_ms = s.rank0_timeout_ms;
        rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, &opts);
        return s.check_waiting_rank(rank, rc, comm);
      },
      s.comm_timeout_ms, s.transports);
}

}  // namespace testing
}  // namespace collx
