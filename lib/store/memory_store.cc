// The memory store: ranks that are threads of one process share a StoreTable; blocked
// readers sleep on a condition variable that every change wakes.
#include <condition_variable>
#include <mutex>

#include "lib/store/store.h"
#include "lib/store/store_common.h"
#include "lib/store/store_table.h"

namespace collx {
namespace {

class MemoryStore : public Store {
 public:
  Status set(const std::string& key, const Bytes& value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(value));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      COLLX_RETURN_IF_ERROR(table_.set(key, value));
    }
    changed_.notify_all();
    return Status::Ok();
  }

  Status get(const std::string& key, Bytes* value, Deadline deadline) override {
    if (value == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "store get: value is null");
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    const int64_t start_us = monotonic_us();
    std::unique_lock<std::mutex> lock(mutex_);
    const std::vector<std::string> keys{key};
    if (!wait_locked(lock, keys, deadline)) return store_timeout_status("get", store_elapsed_ms(start_us), key);
    *value = *table_.find(key);
    return Status::Ok();
  }

  Status add(const std::string& key, int64_t delta, int64_t* new_value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      COLLX_RETURN_IF_ERROR(table_.add(key, delta, &result));
    }
    changed_.notify_all();
    if (new_value) *new_value = result;
    return Status::Ok();
  }

  Status compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                     Bytes* current) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(expected, "expected value"));
    COLLX_RETURN_IF_ERROR(validate_store_value(desired, "desired value"));
    Bytes result;
    bool stored = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      COLLX_RETURN_IF_ERROR(table_.compare_set(key, expected, desired, &result, &stored));
    }
    if (stored) changed_.notify_all();
    if (current) *current = std::move(result);
    return Status::Ok();
  }

  Status wait(const std::vector<std::string>& keys, Deadline deadline) override {
    COLLX_RETURN_IF_ERROR(validate_store_keys(keys));
    const int64_t start_us = monotonic_us();
    std::unique_lock<std::mutex> lock(mutex_);
    if (!wait_locked(lock, keys, deadline))
      return store_timeout_status("wait", store_elapsed_ms(start_us), *table_.first_missing(keys));
    return Status::Ok();
  }

  Status remove(const std::string& key) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    std::lock_guard<std::mutex> lock(mutex_);
    table_.remove(key);
    return Status::Ok();
  }

 private:
  // True once every key exists; false when the deadline passed first.
  bool wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   const Deadline& deadline) {
    auto all_present = [&] { return table_.first_missing(keys) == nullptr; };
    // wait_until(time_point::max()) overflows inside some standard libraries.
    if (deadline.is_never()) {
      changed_.wait(lock, all_present);
      return true;
    }
    return changed_.wait_until(lock, deadline.time_point(), all_present);
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  StoreTable table_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

}  // namespace collx
