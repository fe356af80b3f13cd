// What each forked rank ended with (which step, status, message, time), in a shared mapping
// the test reads after the ranks exited: for tests whose ranks are expected to fail and must
// say why.
#pragma once

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "collx/collx.h"

namespace collx {
namespace testing {

struct RankOutcome {
  char step[32];       // "create", "allreduce", ... ("" when it never got to record)
  int code;            // collx_status_t of that step
  double seconds;      // how long that step took
  char message[1024];  // collx_last_error after it
};

class SharedOutcomes {
 public:
  explicit SharedOutcomes(int ranks) : ranks_(ranks) {
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    outcomes_ = p == MAP_FAILED ? nullptr : static_cast<RankOutcome*>(p);
    if (outcomes_) std::memset(outcomes_, 0, bytes());
  }
  ~SharedOutcomes() {
    if (outcomes_) munmap(outcomes_, bytes());
  }
  SharedOutcomes(const SharedOutcomes&) = delete;
  SharedOutcomes& operator=(const SharedOutcomes&) = delete;

  bool valid() const { return outcomes_ != nullptr; }
  const RankOutcome& operator[](int rank) const { return outcomes_[rank]; }

  // In a rank: what `step` returned.
  void record(int rank, const char* step, collx_status_t code, const char* message, double seconds) {
    RankOutcome& o = outcomes_[rank];
    snprintf(o.step, sizeof o.step, "%s", step);
    o.code = code;
    o.seconds = seconds;
    snprintf(o.message, sizeof o.message, "%s", message ? message : "");
  }

  std::string describe() const {
    std::string out;
    for (int r = 0; r < ranks_; ++r) {
      char line[1200];
      snprintf(line, sizeof line, "  rank %d: %s -> %s after %.2f s: %s\n", r, outcomes_[r].step,
               collx_status_name(static_cast<collx_status_t>(outcomes_[r].code)), outcomes_[r].seconds,
               outcomes_[r].message);
      out += line;
    }
    return out;
  }

 private:
  size_t bytes() const { return sizeof(RankOutcome) * static_cast<size_t>(ranks_); }
  int ranks_;
  RankOutcome* outcomes_ = nullptr;
};

}  // namespace testing
}  // namespace collx
