// Where collx writes files on its own, another local user cannot interfere: a missing
// directory is made owner-only, a planted symbolic link, a directory others can open or one
// of another user is refused with a message saying which and why, files are 0600 and a link
// planted at a file's name is replaced, never followed. The flight recorder's dumps go
// through these checks.
#include "lib/core/private_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "lib/core/flight_recorder.h"
#include "tests/support/scoped_env.h"
#include "tests/support/temp_dir.h"

namespace collx {
namespace {

using testing::temp_dir;

// A scratch folder (0700, ours) removed at the end of the test.
class PrivateDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_dir();
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override { testing::remove_dir(root_); }

  static unsigned mode_of(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return static_cast<unsigned>(st.st_mode) & 07777u;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static bool contains(const Status& st, const std::string& part) {
    return st.message().find(part) != std::string::npos;
  }

  std::string root_;
};

TEST_F(PrivateDir, MissingDirectoriesAreCreatedOwnerOnly) {
  const std::string dir = root_ + "/a/b";
  const mode_t old_umask = ::umask(0);  // even a permissive umask gives no access to others
  UniqueFd fd;
  Status st = open_private_dir(dir + "/", &fd);
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(mode_of(root_ + "/a"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  UniqueFd again;
  EXPECT_TRUE(open_private_dir(dir, &again).ok()) << "an existing private directory is reused";
}

TEST_F(PrivateDir, ASymbolicLinkIsRefusedEvenToOurOwnDirectory) {
  const std::string target = root_ + "/real";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  const std::string link = root_ + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  for (const std::string& path : {link, link + "/"}) {
    UniqueFd fd;
    Status st = open_private_dir(path, &fd);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_USAGE) << path;
    EXPECT_TRUE(contains(st, "'" + link + "' is a symbolic link")) << st.message();
    EXPECT_FALSE(fd.valid());
  }
}

TEST_F(PrivateDir, ADirectoryOthersCanAccessIsRefused) {
  const std::string dir = root_ + "/open";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  UniqueFd fd;
  Status st = open_private_dir(dir, &fd);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_TRUE(contains(st, "directory '" + dir + "' has mode 0777")) << st.message();
  EXPECT_TRUE(contains(st, "chmod 700")) << st.message();
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);  // group read is access too
  EXPECT_EQ(open_private_dir(dir, &fd).code(), COLLX_ERR_INVALID_USAGE);
}

TEST_F(PrivateDir, ADirectoryOfAnotherUserIsRefused) {
  std::string dir = "/";  // not ours unless we are root
  if (::geteuid() == 0) {
    dir = root_ + "/foreign";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);  // nobody
  }
  UniqueFd fd;
  Status st = open_private_dir(dir, &fd);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_TRUE(contains(st, "directory '" + dir + "' belongs to uid")) << st.message();
  EXPECT_TRUE(contains(st, "not to this user (uid " + std::to_string(::geteuid()) + ")")) << st.message();
}

TEST_F(PrivateDir, FilesAre0600AndAPlantedLinkIsReplacedNotFollowed) {
  const std::string victim = root_ + "/victim";
  { std::ofstream(victim) << "untouched"; }
  const std::string dir = root_ + "/dumps";
  UniqueFd fd;
  ASSERT_TRUE(open_private_dir(dir, &fd).ok());
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/rank0.json").c_str()), 0);
  // A link at the temporary name (this pid's) is not followed either.
  const std::string tmp = dir + "/rank0.json.tmp" + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), tmp.c_str()), 0);
  const mode_t old_umask = ::umask(0);
  Status st = write_private_file(fd, dir, "rank0.json", "{}\n");
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(read(victim), "untouched");
  EXPECT_EQ(read(dir + "/rank0.json"), "{}\n");
  struct stat link_st;
  ASSERT_EQ(::lstat((dir + "/rank0.json").c_str(), &link_st), 0);
  EXPECT_TRUE(S_ISREG(link_st.st_mode));
  EXPECT_EQ(mode_of(dir + "/rank0.json"), 0600u);
  EXPECT_FALSE(testing::exists(tmp));
  EXPECT_EQ(write_private_file(fd, dir, "../escape", "x").code(), COLLX_ERR_INVALID_ARG);
}

TEST_F(PrivateDir, AFlightRecordIntoAHijackedDirectoryFailsAndSaysWhy) {
  FlightRecorder fr;
  ASSERT_TRUE(fr.init("hijack", 0, 1, 0, "", "none").ok());
  const std::string open_dir = root_ + "/world-writable";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 01777), 0);
  Status st = dump_flight_records(open_dir);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_TRUE(contains(st, "flight record: directory '" + open_dir + "' has mode 1777")) << st.message();
  EXPECT_FALSE(testing::exists(open_dir + "/rank0.json"));
  const std::string link = root_ + "/planted";
  ASSERT_EQ(::symlink(open_dir.c_str(), link.c_str()), 0);
  st = dump_flight_records(link);
  EXPECT_TRUE(contains(st, "flight record: '" + link + "' is a symbolic link")) << st.message();
  const std::string good = root_ + "/good";
  ASSERT_TRUE(dump_flight_records(good).ok());
  EXPECT_EQ(mode_of(good), 0700u);
  EXPECT_EQ(mode_of(good + "/rank0.json"), 0600u);
}

TEST_F(PrivateDir, TheDefaultDumpDirectoryIsPerUser) {
  ::unsetenv("COLLX_FR_DIR");
  FlightRecorder fr;
  ASSERT_TRUE(fr.init("default", 0, 1, 0, "127.0.0.1:1234", "none").ok());
  const std::string prefix = "/tmp/collx-fr-" + std::to_string(::geteuid()) + "-";
  EXPECT_EQ(fr.dump_dir().rfind(prefix, 0), 0u) << fr.dump_dir();
}

}  // namespace
}  // namespace collx
