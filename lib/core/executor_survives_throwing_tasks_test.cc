// A task that throws on the executor's thread (std::bad_alloc when memory runs out) must not
// end the process: its failure handler gets the exception as a status naming the cause, and
// the tasks queued behind it still run.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "lib/core/executor.h"

namespace collx {
namespace {

TEST(ExecutorSurvivesThrowingTasks, BadAllocReachesTheHandlerAsNoMemoryAndLaterTasksRun) {
  Executor ex;
  Status seen;
  int handler_calls = 0;
  bool later_task_ran = false;
  ex.submit([] { throw std::bad_alloc(); },
            [&](const Status& status) {
              seen = status;
              ++handler_calls;
            },
            0);
  ex.submit([&] { later_task_ran = true; }, [&](const Status&) { ++handler_calls; }, 0);
  ASSERT_TRUE(ex.drain(Deadline::after_ms(30000)));
  EXPECT_EQ(handler_calls, 1);
  EXPECT_EQ(seen.code(), COLLX_ERR_NO_MEMORY);
  EXPECT_NE(seen.message().find("out of memory"), std::string::npos) << seen.message();
  EXPECT_NE(seen.message().find("progress thread"), std::string::npos) << seen.message();
  EXPECT_TRUE(later_task_ran);
  ex.stop();
}

TEST(ExecutorSurvivesThrowingTasks, OtherExceptionsAreInternalErrorsWithTheirText) {
  Executor ex;
  Status seen;
  ex.submit([] { throw std::runtime_error("widget jammed"); }, [&](const Status& status) { seen = status; }, 0);
  ASSERT_TRUE(ex.drain(Deadline::after_ms(30000)));
  EXPECT_EQ(seen.code(), COLLX_ERR_INTERNAL);
  EXPECT_NE(seen.message().find("widget jammed"), std::string::npos) << seen.message();
  ex.stop();
}

TEST(ExecutorSurvivesThrowingTasks, AHandlerThatThrowsTooIsDroppedAndTheThreadGoesOn) {
  Executor ex;
  bool later_task_ran = false;
  ex.submit([] { throw std::bad_alloc(); }, [](const Status&) { throw std::bad_alloc(); }, 0);
  ex.submit([] { throw std::bad_alloc(); }, nullptr, 0);  // no handler at all
  ex.submit([&] { later_task_ran = true; }, nullptr, 0);
  ASSERT_TRUE(ex.drain(Deadline::after_ms(30000)));
  EXPECT_TRUE(later_task_ran);
  ex.stop();
}

}  // namespace
}  // namespace collx
