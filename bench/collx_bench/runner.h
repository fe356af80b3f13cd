// Running and measuring one collective call on this rank through the public C API.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "bench/collx_bench/data.h"
#include "bench/collx_bench/format.h"
#include "collx/collx.h"

namespace collx_bench {

struct RankContext {
  collx_comm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  collx_opts_t opts;  // algorithm, host memory kind, premul scalar of the measured calls
};

// Frees a bench buffer the way it was allocated.
struct BufferFree {
  bool from_collx = false;  // collx_mem_alloc, else posix_memalign
  void operator()(void* p) const;
};

// Page-aligned host buffers, touched once so first-touch page faults stay out of timings.
class Buffers {
 public:
  // zero_copy: from collx_mem_alloc (shared memory peers map), else ordinary pages.
  bool allocate(size_t bytes, bool zero_copy, std::string* error);
  void* send() const { return send_.get(); }
  void* recv() const { return recv_.get(); }

 private:
  std::unique_ptr<void, BufferFree> send_;
  std::unique_ptr<void, BufferFree> recv_;
};

// One call of the collective. Out of place: `send` -> `recv`. In place: `send` is ignored
// and `recv` is the single buffer; the pointers collx.h asks for are derived from it
// (reduce-scatter output and allgather input at rank * count).
collx_status_t run_collective(const RankContext& ctx, const CallShape& shape, void* send, void* recv,
                              bool in_place);

// Warm-up, then `iters` timed calls back to back (after a barrier, so ranks start
// together), then `check_iters` calls on fresh inputs whose outputs are checked. Fills
// cell->time_us (this rank's elapsed / iters) and cell->wrong (this rank's wrong elements);
// bandwidths are computed by the caller from the time averaged over ranks.
// On failure returns the status and sets *what to the call that failed.
collx_status_t measure(const RankContext& ctx, const CallShape& shape, const Buffers& buffers,
                       bool in_place, int warmup_iters, int iters, int check_iters, Cell* cell,
                       std::string* what);

}  // namespace collx_bench
