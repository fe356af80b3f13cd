// Behaviour every store implementation shares, run against the memory, file and TCP stores.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lib/store/store.h"
#include "tests/support/test_env.h"

namespace collx {
namespace {

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

int64_t elapsed_ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

// Each backend hands out handles to one shared store, as separate ranks would hold them.
class MemoryBackend {
 public:
  MemoryBackend() : store_(make_memory_store()) {}
  std::shared_ptr<Store> open() { return store_; }

 private:
  std::shared_ptr<Store> store_;
};

class FileBackend {
 public:
  FileBackend() : directory_(testing::make_temp_dir("collx_store_test_")) {}
  ~FileBackend() { std::system(("rm -rf '" + directory_ + "'").c_str()); }
  std::shared_ptr<Store> open() {
    std::shared_ptr<Store> store;
    Status status = make_file_store(directory_, &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

 private:
  std::string directory_;
};

class TcpBackend {
 public:
  TcpBackend() {
    Status status = start_tcp_store_server("127.0.0.1:0", &server_);
    EXPECT_TRUE(status.ok()) << status.message();
  }
  std::shared_ptr<Store> open() {
    std::shared_ptr<Store> store;
    Status status = server_->connect(Deadline::after_ms(10000), &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

template <typename Backend>
class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : store_(backend_.open()) {}
  Backend backend_;
  std::shared_ptr<Store> store_;
};

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same<T, MemoryBackend>::value) return "Memory";
    if (std::is_same<T, FileBackend>::value) return "File";
    return "Tcp";
  }
};

using Backends = ::testing::Types<MemoryBackend, FileBackend, TcpBackend>;
TYPED_TEST_SUITE(StoreTest, Backends, BackendNames);

TYPED_TEST(StoreTest, GetReturnsTheValueSet) {
  ASSERT_TRUE(this->store_->set("w0/rank/0", bytes_of("address-0")).ok());
  Bytes value;
  Status status = this->store_->get("w0/rank/0", &value, Deadline::after_ms(5000));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(text_of(value), "address-0");
}

TYPED_TEST(StoreTest, SetOverwritesAndOtherHandlesSeeTheNewValue) {
  auto peer = this->backend_.open();
  ASSERT_TRUE(this->store_->set("k", bytes_of("first")).ok());
  ASSERT_TRUE(this->store_->set("k", bytes_of("second")).ok());
  Bytes value;
  ASSERT_TRUE(peer->get("k", &value, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(text_of(value), "second");
}

TYPED_TEST(StoreTest, EmptyValueIsAValue) {
  ASSERT_TRUE(this->store_->set("empty", Bytes()).ok());
  Bytes value = bytes_of("stale");
  ASSERT_TRUE(this->store_->get("empty", &value, Deadline::after_ms(0)).ok());
  EXPECT_TRUE(value.empty());
}

// The same handle serves the waiting get and the set: a TCP client must not serialize them.
TYPED_TEST(StoreTest, GetWaitsForALaterSetFromAnotherThread) {
  auto store = this->store_;
  std::thread writer([store] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(store->set("late", bytes_of("arrived")).ok());
  });
  auto start = std::chrono::steady_clock::now();
  Bytes value;
  Status status = store->get("late", &value, Deadline::after_ms(10000));
  writer.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(text_of(value), "arrived");
  EXPECT_GE(elapsed_ms_since(start), 90);
}

TYPED_TEST(StoreTest, GetWithoutDeadlineWaitsForAPeer) {
  auto peer = this->backend_.open();
  std::thread writer([peer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(peer->set("forever", bytes_of("x")).ok());
  });
  Bytes value;
  Status status = this->store_->get("forever", &value, Deadline::never());
  writer.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(text_of(value), "x");
}

TYPED_TEST(StoreTest, WaitReturnsOnceEveryKeyExists) {
  auto peer = this->backend_.open();
  std::atomic<int> sets_begun{0};
  std::thread writer([&] {
    for (const char* key : {"c", "a", "b"}) {  // out of order on purpose
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      sets_begun++;
      EXPECT_TRUE(peer->set(key, bytes_of(key)).ok());
    }
  });
  Status status = this->store_->wait({"a", "b", "c"}, Deadline::after_ms(10000));
  EXPECT_EQ(sets_begun.load(), 3) << "wait returned before every key was set";
  writer.join();
  ASSERT_TRUE(status.ok()) << status.message();
}

TYPED_TEST(StoreTest, WaitOnNoKeysReturnsAtOnce) {
  EXPECT_TRUE(this->store_->wait({}, Deadline::after_ms(0)).ok());
}

TYPED_TEST(StoreTest, PresentKeyIsReturnedEvenWithAnExpiredDeadline) {
  ASSERT_TRUE(this->store_->set("here", bytes_of("v")).ok());
  Bytes value;
  EXPECT_TRUE(this->store_->get("here", &value, Deadline::after_ms(0)).ok());
  EXPECT_TRUE(this->store_->wait({"here"}, Deadline::after_ms(0)).ok());
}

TYPED_TEST(StoreTest, GetTimeoutNamesTheMissingKey) {
  auto start = std::chrono::steady_clock::now();
  Bytes value;
  Status status = this->store_->get("w0/peer/3", &value, Deadline::after_ms(100));
  const int64_t elapsed = elapsed_ms_since(start);
  EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << status.message();
  EXPECT_NE(status.message().find("missing key 'w0/peer/3'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("timed out after"), std::string::npos) << status.message();
  EXPECT_GE(elapsed, 95);
  EXPECT_LT(elapsed, 1000);
}

TYPED_TEST(StoreTest, WaitTimeoutNamesTheFirstMissingKey) {
  ASSERT_TRUE(this->store_->set("present/1", bytes_of("1")).ok());
  ASSERT_TRUE(this->store_->set("present/3", bytes_of("3")).ok());
  auto start = std::chrono::steady_clock::now();
  Status status = this->store_->wait({"present/1", "absent/2", "present/3"}, Deadline::after_ms(100));
  const int64_t elapsed = elapsed_ms_since(start);
  EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << status.message();
  EXPECT_NE(status.message().find("missing key 'absent/2'"), std::string::npos) << status.message();
  EXPECT_GE(elapsed, 95);
  EXPECT_LT(elapsed, 1000);
}

TYPED_TEST(StoreTest, AddStoresDecimalText) {
  int64_t result = 0;
  ASSERT_TRUE(this->store_->add("counter", 5, &result).ok());
  EXPECT_EQ(result, 5);
  Bytes value;
  ASSERT_TRUE(this->store_->get("counter", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), "5");
  ASSERT_TRUE(this->store_->add("counter", -7, &result).ok());
  EXPECT_EQ(result, -2);
  ASSERT_TRUE(this->store_->get("counter", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), "-2");
  ASSERT_TRUE(this->store_->set("counter", bytes_of("40")).ok());
  ASSERT_TRUE(this->store_->add("counter", 2, &result).ok());
  EXPECT_EQ(result, 42);
}

TYPED_TEST(StoreTest, AddOnANonIntegerValueIsInvalidArg) {
  for (const char* bad : {"five", "", "-", "12x", "99999999999999999999"}) {
    ASSERT_TRUE(this->store_->set("not-a-number", bytes_of(bad)).ok());
    int64_t result = 0;
    Status status = this->store_->add("not-a-number", 1, &result);
    EXPECT_EQ(status.code(), COLLX_ERR_INVALID_ARG) << "value '" << bad << "': " << status.message();
    Bytes value;
    ASSERT_TRUE(this->store_->get("not-a-number", &value, Deadline::after_ms(0)).ok());
    EXPECT_EQ(text_of(value), bad);  // left untouched
  }
}

TYPED_TEST(StoreTest, AddFromManyThreadsIsAtomic) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto store = this->backend_.open();  // one handle per "rank"
      for (int i = 0; i < kAdds; ++i) {
        int64_t result = 0;
        Status status = store->add("shared/counter", 1, &result);
        ASSERT_TRUE(status.ok()) << status.message();
        seen[t].push_back(result);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // Every add saw a distinct intermediate value: none was lost or applied twice.
  std::set<int64_t> all;
  for (const auto& values : seen) all.insert(values.begin(), values.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kAdds));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
  Bytes value;
  ASSERT_TRUE(this->store_->get("shared/counter", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), std::to_string(kThreads * kAdds));
}

TYPED_TEST(StoreTest, CompareSetSwapsOnlyOnAMatch) {
  Bytes current;
  // Missing key and empty expected: stored.
  ASSERT_TRUE(this->store_->compare_set("cas", Bytes(), bytes_of("one"), &current).ok());
  EXPECT_EQ(text_of(current), "one");
  // Mismatch: unchanged, the current value comes back.
  ASSERT_TRUE(this->store_->compare_set("cas", bytes_of("wrong"), bytes_of("two"), &current).ok());
  EXPECT_EQ(text_of(current), "one");
  // Match: swapped.
  ASSERT_TRUE(this->store_->compare_set("cas", bytes_of("one"), bytes_of("two"), &current).ok());
  EXPECT_EQ(text_of(current), "two");
  // Present key and empty expected: a mismatch, not a creation.
  ASSERT_TRUE(this->store_->compare_set("cas", Bytes(), bytes_of("three"), &current).ok());
  EXPECT_EQ(text_of(current), "two");
  Bytes value;
  ASSERT_TRUE(this->store_->get("cas", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), "two");
}

TYPED_TEST(StoreTest, CompareSetOnAMissingKeyWithAnExpectedValueStoresNothing) {
  Bytes current = bytes_of("stale");
  ASSERT_TRUE(this->store_->compare_set("absent", bytes_of("old"), bytes_of("new"), &current).ok());
  EXPECT_TRUE(current.empty()) << text_of(current);
  Bytes value;
  EXPECT_EQ(this->store_->get("absent", &value, Deadline::after_ms(0)).code(), COLLX_ERR_TIMEOUT);
}

TYPED_TEST(StoreTest, CompareSetElectsExactlyOneWinner) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto store = this->backend_.open();
      Bytes current;
      Status status = store->compare_set("leader", Bytes(), bytes_of("rank" + std::to_string(t)), &current);
      ASSERT_TRUE(status.ok()) << status.message();
      results[t] = text_of(current);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, results[0]);
  EXPECT_EQ(results[0].rfind("rank", 0), 0u);
}

TYPED_TEST(StoreTest, RemoveDeletesTheKey) {
  ASSERT_TRUE(this->store_->set("doomed", bytes_of("v")).ok());
  ASSERT_TRUE(this->store_->remove("doomed").ok());
  Bytes value;
  EXPECT_EQ(this->store_->get("doomed", &value, Deadline::after_ms(0)).code(), COLLX_ERR_TIMEOUT);
  EXPECT_TRUE(this->store_->remove("doomed").ok());  // removing a missing key is fine
  int64_t result = 0;
  ASSERT_TRUE(this->store_->add("doomed", 3, &result).ok());
  EXPECT_EQ(result, 3);  // counts again from zero
}

TYPED_TEST(StoreTest, KeysWithSlashesDotsAndBinaryBytesStayDistinct) {
  const std::vector<std::string> keys = {"a/b", "a_b", "a%2Fb", "../escape", "..", ".", "", std::string("nul\0x", 5),
                                         "nul", "UPPER", "upper", std::string(1, '\xff')};
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(this->store_->set(keys[i], bytes_of(std::to_string(i))).ok());
  auto peer = this->backend_.open();
  for (size_t i = 0; i < keys.size(); ++i) {
    Bytes value;
    ASSERT_TRUE(peer->get(keys[i], &value, Deadline::after_ms(0)).ok()) << i;
    EXPECT_EQ(text_of(value), std::to_string(i)) << i;
  }
}

TYPED_TEST(StoreTest, ValuesAndKeysAtTheLimitsRoundTrip) {
  Bytes big(kStoreMaxValueBytes);
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<uint8_t>(i * 7 + 1);
  big.back() = 0xab;
  std::string long_key(kStoreMaxKeyBytes, 'k');
  long_key[17] = '/';
  std::string other_long_key = long_key;
  other_long_key.back() = 'j';  // differs only in its last byte
  ASSERT_TRUE(this->store_->set(long_key, big).ok());
  ASSERT_TRUE(this->store_->set(other_long_key, bytes_of("other")).ok());
  auto peer = this->backend_.open();
  Bytes value;
  Status status = peer->get(long_key, &value, Deadline::after_ms(20000));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(value == big);
  ASSERT_TRUE(peer->get(other_long_key, &value, Deadline::after_ms(20000)).ok());
  EXPECT_EQ(text_of(value), "other");
  Bytes current;
  ASSERT_TRUE(peer->compare_set(other_long_key, bytes_of("other"), big, &current).ok());
  EXPECT_TRUE(current == big);
}

TYPED_TEST(StoreTest, OversizedKeysAndValuesAreInvalidArgs) {
  const std::string too_long_key(kStoreMaxKeyBytes + 1, 'k');
  const Bytes too_big(kStoreMaxValueBytes + 1);
  Bytes value;
  int64_t result = 0;
  EXPECT_EQ(this->store_->set(too_long_key, bytes_of("v")).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->set("k", too_big).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->get(too_long_key, &value, Deadline::after_ms(0)).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->add(too_long_key, 1, &result).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->compare_set(too_long_key, Bytes(), bytes_of("v"), &value).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->compare_set("k", Bytes(), too_big, &value).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->compare_set("k", too_big, Bytes(), &value).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->wait({"k", too_long_key}, Deadline::after_ms(0)).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->wait(std::vector<std::string>(kStoreMaxWaitKeys + 1, "k"), Deadline::after_ms(0)).code(),
            COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(this->store_->remove(too_long_key).code(), COLLX_ERR_INVALID_ARG);
  Status status = this->store_->set("k", too_big);
  EXPECT_NE(status.message().find("exceeds the limit"), std::string::npos) << status.message();
  // Nothing was stored by the rejected calls.
  EXPECT_EQ(this->store_->get("k", &value, Deadline::after_ms(0)).code(), COLLX_ERR_TIMEOUT);
}

}  // namespace
}  // namespace collx
