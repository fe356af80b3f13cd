#include "lib/common/periodic_thread.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace collx {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Waits (yielding) until `done` holds; false after 10 s.
template <typename F>
bool eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(PeriodicThread, ManyTasksShareOneThread) {
  PeriodicThread watchdog(microseconds(500));
  constexpr int kTasks = 32;
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> runs[kTasks];
  std::vector<PeriodicThread::TaskId> ids;
  for (int i = 0; i < kTasks; ++i) {
    runs[i] = 0;
    ids.push_back(watchdog.add([&, i] {
      runs[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }));
  }
  ASSERT_TRUE(eventually([&] {
    for (auto& r : runs)
      if (r.load() < 3) return false;
    return true;
  })) << "every task runs again and again";
  for (auto id : ids) watchdog.remove(id);
  EXPECT_EQ(watchdog.threads_started(), 1u);
  EXPECT_EQ(threads.size(), 1u) << "one thread serves every task";
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(PeriodicThread, ARemovedTaskNeverRunsAgainEvenIfItWasRunning) {
  PeriodicThread watchdog(microseconds(200));
  std::atomic<bool> inside{false};
  std::atomic<int> runs{0};
  auto id = watchdog.add([&] {
    inside = true;
    std::this_thread::sleep_for(milliseconds(20));  // remove() arrives while this runs
    runs.fetch_add(1);
    inside = false;
  });
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  watchdog.remove(id);
  EXPECT_FALSE(inside.load()) << "remove() returned while the task was still running";
  const int after = runs.load();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(runs.load(), after);
}

TEST(PeriodicThread, TheThreadEndsWithTheLastTaskAndComesBackForTheNext) {
  PeriodicThread watchdog(microseconds(200));
  std::atomic<int> runs{0};
  auto first = watchdog.add([&] { runs.fetch_add(1); });
  ASSERT_TRUE(eventually([&] { return runs.load() > 0; }));
  watchdog.remove(first);
  EXPECT_EQ(watchdog.tasks(), 0u);
  auto second = watchdog.add([&] { runs.fetch_add(1); });
  const int before = runs.load();
  ASSERT_TRUE(eventually([&] { return runs.load() > before; })) << "a task added after an idle spell runs";
  watchdog.remove(second);
  EXPECT_LE(watchdog.threads_started(), 2u);
}

TEST(PeriodicThread, TasksAddedAndRemovedFromManyThreadsAtOnce) {
  PeriodicThread watchdog(microseconds(100));
  std::vector<std::thread> owners;
  std::atomic<int> total{0};
  for (int t = 0; t < 8; ++t) {
    owners.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::atomic<int> mine{0};  // lives on this stack: must not be touched after remove()
        auto id = watchdog.add([&mine, &total] {
          mine.fetch_add(1);
          total.fetch_add(1);
        });
        if (i % 5 == 0) eventually([&] { return mine.load() > 0; });
        watchdog.remove(id);
      }
    });
  }
  for (auto& o : owners) o.join();
  EXPECT_EQ(watchdog.tasks(), 0u);
  EXPECT_GT(total.load(), 0);
}

}  // namespace
}  // namespace collx
