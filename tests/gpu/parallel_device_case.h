// The handle-less parallel ops on device buffers checked against the same call on host
// buffers, on one rank: shared by the thread-rank (parallel_device_test) and process-rank
// (device_collectives_process_test) tiers. Failures come back as text (forked ranks have no
// gtest to report to).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

using Bytes = std::vector<uint8_t>;
using BufferOp = std::function<collx_status_t(const std::vector<void*>& buffers)>;

// A created stream set as the thread's parallel stream for the scope.
class RankStream {
 public:
  RankStream();
  ~RankStream();
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;
  bool ok() const { return ok_; }
  bool wait() const;

 private:
  void* s_ = nullptr;
  bool ok_ = false;
};

template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// count elements of dt (FLOAT32, BFLOAT16, FLOAT16) that differ along the buffer and between
// ranks (a misplaced block shows): small integers whose sums over a few ranks are exact.
Bytes parallel_data(collx_datatype_t dt, size_t count, int rank, unsigned salt);

// Runs op on host copies of `buffers`, then on device copies, and returns "" when every
// buffer ends with the same bytes, else what differed. gpu_rel_tol > 0: on a real GPU
// (whose expf/logf differ from the host's by a few ulp) float32 values within it pass.
// Collective when op is: every rank calls it alike.
std::string same_on_device(const std::string& what, const std::vector<Bytes>& buffers, const RankStream& stream,
                           const BufferOp& op, float gpu_rel_tol = 0);

// On every rank of comm (tp = pp group = comm, `label` names the world): the tp/sp ops in
// float32, bfloat16 and float16, the pipeline ring exchange and the vocab-parallel
// cross-entropy (forward, backward, an out-of-range target), each on device buffers
// against host buffers, on `stream`. Returns "" or every failure.
std::string run_parallel_device_cases(int rank, int size, collx_comm_t comm, const std::string& label,
                                      const RankStream& stream);

}  // namespace testing
}  // namespace collx
