#include "lib/common/process_identity.h"

#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

namespace collx {
namespace {

TEST(ProcessIdentity, IsStableWithinAProcessAndAcrossThreads) {
  const ProcessIdentity main_thread = this_process();
  ProcessIdentity other;
  std::thread([&] { other = this_process(); }).join();
  EXPECT_TRUE(same_process(main_thread, this_process()));
  EXPECT_TRUE(same_process(main_thread, other));
  EXPECT_EQ(main_thread.pid, static_cast<int64_t>(getpid()));
}

TEST(ProcessIdentity, EqualPidsInDifferentProcessesAreNotTheSameProcess) {
  // Two containers can each run a process with one pid: only the nonce tells them apart.
  ProcessIdentity mine = this_process();
  ProcessIdentity twin = mine;
  twin.nonce[0] ^= 1;
  EXPECT_FALSE(same_process(mine, twin));
  ProcessIdentity other_pid = mine;
  other_pid.pid += 1;
  EXPECT_FALSE(same_process(mine, other_pid));
}

TEST(ProcessIdentity, AForkedChildIsAnotherProcess) {
  const ProcessIdentity parent = this_process();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const ProcessIdentity mine = this_process();
    const ssize_t n = write(fds[1], &mine, sizeof mine);
    _exit(n == static_cast<ssize_t>(sizeof mine) ? 0 : 1);
  }
  ProcessIdentity seen;
  ASSERT_EQ(read(fds[0], &seen, sizeof seen), static_cast<ssize_t>(sizeof seen));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(fds[0]);
  close(fds[1]);
  EXPECT_FALSE(same_process(parent, seen));
  EXPECT_NE(0, memcmp(parent.nonce, seen.nonce, sizeof seen.nonce)) << "the child kept its parent's nonce";
}

}  // namespace
}  // namespace collx
