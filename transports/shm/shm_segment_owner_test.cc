// Segments cannot be planted by another local user: names carry a random part that differs
// every time, and a peer's segment is mapped only when it is this user's and nobody else can
// open it (wrong owner or mode: COLLX_ERR_PROTOCOL naming the segment and what is wrong).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <string>

#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm {
namespace {

// Rank 0's segment, created here, and a descriptor of it to change its owner or mode with.
struct PlantedSegment {
  uint64_t comm = shm_test::next_comm_id();
  std::string name;
  Segment owner;
  int fd = -1;

  bool make() {
    if (!make_segment_name(comm, 0, ::getpid(), &name).ok()) return false;
    if (!owner.create(name, comm, 0, 2).ok()) return false;
    fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    return fd >= 0;
  }
  Status open_as_peer() {
    Segment peer;
    return peer.open(name, comm, 0, 2, ::getpid());
  }
  ~PlantedSegment() {
    if (fd >= 0) ::close(fd);
  }
};

TEST(ShmSegmentOwner, NamesCarryARandomPartThatDiffersEachTime) {
  const uint64_t comm = 0x1234abcdull;
  std::string a, b;
  ASSERT_TRUE(make_segment_name(comm, 3, 4242, &a).ok());
  ASSERT_TRUE(make_segment_name(comm, 3, 4242, &b).ok());
  EXPECT_NE(a, b);
  const std::string prefix = "/collx-000000001234abcd-3-4242-";
  for (const std::string& name : {a, b}) {
    ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
    const std::string random = name.substr(prefix.size());
    EXPECT_EQ(random.size(), 32u) << name;
    for (char c : random) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << name;
  }
}

TEST(ShmSegmentOwner, ASegmentOthersCanOpenIsRefused) {
  PlantedSegment s;
  ASSERT_TRUE(s.make());
  ASSERT_TRUE(s.open_as_peer().ok()) << "a 0600 segment of this user maps";
  for (mode_t mode : {0666, 0640, 0604}) {
    ASSERT_EQ(::fchmod(s.fd, mode), 0);
    Status st = s.open_as_peer();
    EXPECT_EQ(st.code(), COLLX_ERR_PROTOCOL);
    char expected[16];
    std::snprintf(expected, sizeof expected, "mode %04o", static_cast<unsigned>(mode));
    EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(s.name), std::string::npos) << st.message();
  }
}

TEST(ShmSegmentOwner, ASegmentOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a segment's owner needs root";
  PlantedSegment s;
  ASSERT_TRUE(s.make());
  ASSERT_EQ(::fchown(s.fd, 65534, 65534), 0);  // nobody
  Status st = s.open_as_peer();
  EXPECT_EQ(st.code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(st.message().find("shared-memory segment " + s.name + " of rank 0 belongs to uid 65534, not to this user"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace shm
}  // namespace collx
