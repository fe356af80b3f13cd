// Behaviour specific to the file store: processes sharing a directory, key names that must
// never escape it, files checked whole (length, checksum), a lock that cannot hang a caller,
// and a directory private to its user.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "lib/store/store.h"
#include "lib/common/unique_fd.h"
#include "tests/support/test_env.h"

namespace collx {
namespace {

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

class FileStoreTest : public ::testing::Test {
 protected:
  FileStoreTest() : directory_(testing::make_temp_dir("collx_file_store_")) {}
  ~FileStoreTest() override { std::system(("rm -rf '" + directory_ + "'").c_str()); }

  std::shared_ptr<Store> open(const std::string& directory) {
    std::shared_ptr<Store> store;
    Status status = make_file_store(directory, &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

  std::vector<std::string> entries(const std::string& directory) {
    std::vector<std::string> names;
    DIR* dir = ::opendir(directory.c_str());
    if (dir == nullptr) return names;
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    return names;
  }

  // Runs `body` in `count` forked children; returns how many exited 0.
  template <typename Body>
  int run_children(int count, Body body) {
    std::vector<pid_t> children;
    for (int i = 0; i < count; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) ::_exit(body(i) ? 0 : 1);
      children.push_back(pid);
    }
    int succeeded = 0;
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++succeeded;
    }
    return succeeded;
  }

  // The one key file of the directory (the test stored one key).
  std::string only_key_file() {
    std::vector<std::string> names;
    for (const std::string& name : entries(directory_))
      if (name.rfind("k_", 0) == 0) names.push_back(directory_ + "/" + name);
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? "" : names[0];
  }

  std::string directory_;
};

TEST_F(FileStoreTest, AddIsAtomicAcrossProcesses) {
  constexpr int kProcesses = 4, kAdds = 100;
  int succeeded = run_children(kProcesses, [&](int) {
    std::shared_ptr<Store> store;
    if (!make_file_store(directory_, &store).ok()) return false;
    for (int i = 0; i < kAdds; ++i)
      if (!store->add("counter", 1, nullptr).ok()) return false;
    return true;
  });
  ASSERT_EQ(succeeded, kProcesses);
  Bytes value;
  ASSERT_TRUE(open(directory_)->get("counter", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), std::to_string(kProcesses * kAdds));
}

TEST_F(FileStoreTest, CompareSetElectsOneLeaderAcrossProcesses) {
  constexpr int kProcesses = 4;
  int succeeded = run_children(kProcesses, [&](int index) {
    std::shared_ptr<Store> store;
    if (!make_file_store(directory_, &store).ok()) return false;
    Bytes current;
    if (!store->compare_set("leader", Bytes(), bytes_of("p" + std::to_string(index)), &current).ok()) return false;
    // Every process reports who it saw win.
    return store->set("saw/" + std::to_string(index), current).ok();
  });
  ASSERT_EQ(succeeded, kProcesses);
  auto store = open(directory_);
  std::set<std::string> winners;
  for (int i = 0; i < kProcesses; ++i) {
    Bytes value;
    ASSERT_TRUE(store->get("saw/" + std::to_string(i), &value, Deadline::after_ms(0)).ok());
    winners.insert(text_of(value));
  }
  EXPECT_EQ(winners.size(), 1u);
}

TEST_F(FileStoreTest, GetInOneProcessSeesASetFromAnother) {
  int succeeded = run_children(1, [&](int) {
    std::shared_ptr<Store> store;
    if (!make_file_store(directory_, &store).ok()) return false;
    ::usleep(100 * 1000);
    return store->set("from-child", bytes_of("hello")).ok();
  });
  Bytes value;
  Status status = open(directory_)->get("from-child", &value, Deadline::after_ms(10000));
  ASSERT_EQ(succeeded, 1);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(text_of(value), "hello");
}

TEST_F(FileStoreTest, KeysNeverNameFilesOutsideTheDirectory) {
  const std::string inner = directory_ + "/store";
  auto store = open(inner);
  for (const char* key : {"../escape", "/abs/path", "a/b/c", "..", "."})
    ASSERT_TRUE(store->set(key, bytes_of("v")).ok()) << key;
  // The only entry beside the store directory is the store directory itself.
  EXPECT_EQ(entries(directory_), std::vector<std::string>{"store"});
  for (const std::string& name : entries(inner)) {
    EXPECT_EQ(name.find('/'), std::string::npos);
    struct stat info;
    ASSERT_EQ(::stat((inner + "/" + name).c_str(), &info), 0);
    EXPECT_TRUE(S_ISREG(info.st_mode)) << name;
  }
}

TEST_F(FileStoreTest, LongKeysGetShortFileNames) {
  auto store = open(directory_);
  std::string long_key(kStoreMaxKeyBytes, 'x');
  ASSERT_TRUE(store->set(long_key, bytes_of("v")).ok());
  for (const std::string& name : entries(directory_)) EXPECT_LE(name.size(), 255u) << name;
}

TEST_F(FileStoreTest, MissingDirectoriesAreCreated) {
  const std::string nested = directory_ + "/a/b/c";
  auto store = open(nested);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->set("k", bytes_of("v")).ok());
  Bytes value;
  ASSERT_TRUE(open(nested)->get("k", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), "v");
}

TEST_F(FileStoreTest, UnusableDirectoryIsAnError) {
  const std::string file = directory_ + "/plain-file";
  ASSERT_TRUE(open(directory_)->set("k", Bytes()).ok());
  std::system(("touch '" + file + "'").c_str());
  std::shared_ptr<Store> store;
  Status status = make_file_store(file + "/sub", &store);
  EXPECT_EQ(status.code(), COLLX_ERR_SYSTEM) << status.message();
  EXPECT_NE(status.message().find(file), std::string::npos) << status.message();
  EXPECT_EQ(make_file_store("", &store).code(), COLLX_ERR_INVALID_ARG);
}

TEST_F(FileStoreTest, NoTemporaryFilesAreLeftBehind) {
  auto store = open(directory_);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->set("k" + std::to_string(i % 3), bytes_of("v")).ok());
  ASSERT_TRUE(store->add("n", 1, nullptr).ok());
  for (const std::string& name : entries(directory_)) EXPECT_EQ(name.rfind(".tmp", 0), std::string::npos) << name;
}

TEST_F(FileStoreTest, AFileHoldingAnotherKeyIsReportedNotReturned) {
  auto store = open(directory_);
  ASSERT_TRUE(store->set("a", bytes_of("value of a")).ok());
  ASSERT_TRUE(store->set("b", bytes_of("value of b")).ok());
  // Swap the two files behind the store's back: contents no longer match their names.
  std::vector<std::string> names;
  for (const std::string& name : entries(directory_))
    if (name.rfind("k_", 0) == 0) names.push_back(name);
  ASSERT_EQ(names.size(), 2u);
  ASSERT_EQ(::rename((directory_ + "/" + names[0]).c_str(), (directory_ + "/swap").c_str()), 0);
  ASSERT_EQ(::rename((directory_ + "/" + names[1]).c_str(), (directory_ + "/" + names[0]).c_str()), 0);
  Bytes value;
  Status status = store->get("a", &value, Deadline::after_ms(0));
  if (names[0] != "k_61") status = store->get("b", &value, Deadline::after_ms(0));
  EXPECT_EQ(status.code(), COLLX_ERR_INTERNAL) << status.message();
  EXPECT_NE(status.message().find("does not hold key"), std::string::npos) << status.message();
}

// A bit flipped in a value on disk is caught by the checksum, not returned.
TEST_F(FileStoreTest, CorruptValueIsReportedByItsChecksum) {
  auto store = open(directory_);
  ASSERT_TRUE(store->set("k", bytes_of("a value on disk")).ok());
  const std::string path = only_key_file();
  UniqueFd fd(::open(path.c_str(), O_RDWR));
  ASSERT_TRUE(fd.valid());
  struct stat info;
  ASSERT_EQ(::fstat(fd.get(), &info), 0);
  char last = 0;
  ASSERT_EQ(::pread(fd.get(), &last, 1, info.st_size - 1), 1);
  last ^= 0x10;
  ASSERT_EQ(::pwrite(fd.get(), &last, 1, info.st_size - 1), 1);
  Bytes value;
  Status status = store->get("k", &value, Deadline::after_ms(0));
  EXPECT_EQ(status.code(), COLLX_ERR_INTERNAL) << status.message();
  EXPECT_NE(status.message().find("checksum"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
}

// A file cut short (a crash before write-back on a file system without ordering) is reported
// by its value length.
TEST_F(FileStoreTest, TruncatedFileIsReportedByItsLength) {
  auto store = open(directory_);
  ASSERT_TRUE(store->set("k", bytes_of("twenty bytes of data")).ok());
  const std::string path = only_key_file();
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  ASSERT_EQ(::truncate(path.c_str(), info.st_size - 5), 0);
  Bytes value;
  Status status = store->get("k", &value, Deadline::after_ms(0));
  EXPECT_EQ(status.code(), COLLX_ERR_INTERNAL) << status.message();
  EXPECT_NE(status.message().find("holds 15 value bytes but its header says 20"), std::string::npos)
      << status.message();
}

// Another process holding the lock (hung, say) makes add() a timeout naming the lock, not a hang.
TEST_F(FileStoreTest, LockHeldTooLongIsATimeout) {
  ::setenv("COLLX_TIMEOUT_MS", "300", 1);
  auto store = open(directory_);
  ::unsetenv("COLLX_TIMEOUT_MS");
  ASSERT_TRUE(store);
  UniqueFd holder(::open((directory_ + "/.lock").c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(holder.valid());
  ASSERT_EQ(::flock(holder.get(), LOCK_EX), 0);
  const auto start = std::chrono::steady_clock::now();
  Status status = store->add("n", 1, nullptr);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << status.message();
  EXPECT_NE(status.message().find(".lock stayed locked"), std::string::npos) << status.message();
  EXPECT_GE(waited, 300);
  Bytes current;
  EXPECT_EQ(store->compare_set("c", Bytes(), bytes_of("v"), &current).code(), COLLX_ERR_TIMEOUT);
  holder.reset();  // released: the store works again
  int64_t value = 0;
  ASSERT_TRUE(store->add("n", 1, &value).ok());
  EXPECT_EQ(value, 1);
}

TEST_F(FileStoreTest, DirectoryAndFilesArePrivate) {
  const std::string nested = directory_ + "/made/here";
  auto store = open(nested);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->add("n", 1, nullptr).ok());
  struct stat info;
  ASSERT_EQ(::stat(nested.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  for (const std::string& name : entries(nested)) {
    ASSERT_EQ(::stat((nested + "/" + name).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u) << name;
  }
}

TEST_F(FileStoreTest, DirectoryOthersCanWriteIsRefused) {
  ASSERT_EQ(::chmod(directory_.c_str(), 0777), 0);
  std::shared_ptr<Store> store;
  Status status = make_file_store(directory_, &store);
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_USAGE) << status.message();
  EXPECT_NE(status.message().find("writable by other users (mode 777)"), std::string::npos) << status.message();
  ASSERT_EQ(::chmod(directory_.c_str(), 0755), 0);  // readable by others: allowed
  EXPECT_TRUE(make_file_store(directory_, &store).ok());
}

// Owner checks need a second user: run as root, hand the directory and a key file to nobody.
TEST_F(FileStoreTest, DirectoryOrFileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const uid_t other = 65534;  // nobody
  auto store = open(directory_);
  ASSERT_TRUE(store->set("k", bytes_of("v")).ok());
  ASSERT_EQ(::chown(only_key_file().c_str(), other, other), 0);
  Bytes value;
  Status status = store->get("k", &value, Deadline::after_ms(0));
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_USAGE) << status.message();
  EXPECT_NE(status.message().find("belongs to uid 65534"), std::string::npos) << status.message();
  ASSERT_EQ(::chown(directory_.c_str(), other, other), 0);
  std::shared_ptr<Store> again;
  status = make_file_store(directory_, &again);
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_USAGE) << status.message();
  EXPECT_NE(status.message().find(directory_), std::string::npos) << status.message();
}

}  // namespace
}  // namespace collx
