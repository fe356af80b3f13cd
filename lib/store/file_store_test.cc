// Behaviour specific to the file store: processes sharing a directory, and key names that
// must never escape it.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "lib/store/store.h"
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

}  // namespace
}  // namespace collx
