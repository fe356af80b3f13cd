// Ranks as forked processes talking over real TCP, each bootstrapping through a TCP store
// that rank 0 hosts on a free loopback port. A child's exit code is its verdict; the parent
// enforces a deadline and kills stragglers, so a hang becomes a failure, never a stuck suite.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

struct RankResult {
  int exit_code = -1;    // -1 when killed by a signal
  int signal = 0;        // the signal that ended it, if any
  double seconds = 0;    // from fork to exit
};

// A free TCP port on 127.0.0.1 (bound, read, closed).
int free_port();

// Forks `size` children running body(rank, size, store_addr) and waits up to timeout_ms for
// all of them (then SIGKILLs the rest). The body's return value is the exit code.
std::vector<RankResult> run_processes(int size, int timeout_ms,
                                      const std::function<int(int rank, int size, const std::string& store_addr)>& body);

// In a rank of run_processes: creates the world communicator at `store_addr` (rank 0 hosts
// the store) with the given deadline and COLLX_TRANSPORT_* mask (0: the default).
collx_status_t create_world_comm(int rank, int size, const std::string& store_addr, int64_t comm_timeout_ms,
                                 uint32_t transports, collx_comm_t* out);

// The same, creating the world communicator for the body and destroying it afterwards.
// Creation failures exit with 100.
std::vector<RankResult> run_comm_processes(int size, int timeout_ms,
                                           const std::function<int(int rank, int size, collx_comm_t comm)>& body,
                                           int64_t comm_timeout_ms = 30000, uint32_t transports = 0);

// Human-readable summary for assertion messages.
std::string describe(const std::vector<RankResult>& results);

// Fails the child with a message on stderr (for use inside bodies).
#define COLLX_CHILD_CHECK(cond, ...)                                        \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "[rank check failed %s:%d] %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      return 1;                                                             \
    }                                                                       \
  } while (0)

}  // namespace testing
}  // namespace collx
