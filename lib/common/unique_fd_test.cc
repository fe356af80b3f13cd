#include "lib/common/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <utility>

namespace collx {
namespace {

// A descriptor is open when fcntl can read its flags.
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesOnDestructionExactlyOnce) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  { UniqueFd a(fds[0]); }
  EXPECT_FALSE(is_open(fds[0]));
  UniqueFd b(fds[1]);
  UniqueFd c(std::move(b));  // the move hands ownership over: b closes nothing
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(c.get(), fds[1]);
  EXPECT_TRUE(is_open(fds[1]));
}

TEST(UniqueFd, ResetClosesTheOldDescriptorAndReleaseKeepsItOpen) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd a(fds[0]);
  a.reset(fds[1]);
  EXPECT_FALSE(is_open(fds[0]));
  const int kept = a.release();
  EXPECT_EQ(kept, fds[1]);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(is_open(kept));
  ::close(kept);
}

TEST(UniqueFd, MoveAssignmentClosesTheTargetsDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd a(fds[0]);
  UniqueFd b(fds[1]);
  a = std::move(b);
  EXPECT_FALSE(is_open(fds[0]));
  EXPECT_EQ(a.get(), fds[1]);
  EXPECT_FALSE(b.valid());
}

}  // namespace
}  // namespace collx
