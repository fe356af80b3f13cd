// Deadline: the point in time by which a blocking call must return.
#pragma once

#include <chrono>
#include <cstdint>

namespace collx {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // A deadline that never expires.
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  // `timeout_ms` < 0 means never.
  static Deadline after_ms(int64_t timeout_ms) {
    if (timeout_ms < 0) return never();
    return Deadline(Clock::now() + std::chrono::milliseconds(timeout_ms));
  }
  // The same counted from `now` (a clock reading the caller already holds: one read serves
  // several timestamps of a call).
  static Deadline after_ms(int64_t timeout_ms, Clock::time_point now) {
    if (timeout_ms < 0) return never();
    return Deadline(now + std::chrono::milliseconds(timeout_ms));
  }

  bool is_never() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= at_; }

  // Milliseconds left, rounded up, clamped to [0, cap]; `cap` when never.
  int remaining_ms(int cap = 1 << 30) const {
    if (is_never()) return cap;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    int64_t ms = (left + 999) / 1000;
    return ms > cap ? cap : static_cast<int>(ms);
  }

  Clock::time_point time_point() const { return at_; }
  // The earlier of two deadlines.
  Deadline min(const Deadline& other) const { return at_ <= other.at_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// Microseconds on the monotonic clock (for timestamps and benchmarks).
inline int64_t monotonic_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace collx
