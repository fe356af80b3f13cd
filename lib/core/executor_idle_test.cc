// Executor::idle() (read without the lock by every blocking collective) is false from
// submit until the task has run, and the task's effects are visible once it says idle.
#include "lib/core/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace collx {
namespace {

TEST(ExecutorIdle, BusyFromSubmitUntilTheTaskRanAndItsEffectsAreVisible) {
  Executor ex;
  EXPECT_TRUE(ex.idle());
  std::atomic<bool> release{false};
  int written = 0;  // plain: idle() must order the task's write before our read
  ex.submit(
      [&] {
        while (!release.load()) std::this_thread::yield();
        written = 42;
      },
      nullptr, 0);
  EXPECT_FALSE(ex.idle());
  ex.submit([&] { written += 1; }, nullptr, 0);
  release = true;
  while (!ex.idle()) std::this_thread::yield();
  EXPECT_EQ(written, 43);
  EXPECT_TRUE(ex.drain(Deadline::after_ms(1000)));
  ex.stop();
  EXPECT_TRUE(ex.idle());
}

}  // namespace
}  // namespace collx
