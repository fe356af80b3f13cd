// StoreTable: the key-value map and the meaning of each store operation on it. The memory
// store and the TCP server both keep their keys here, so their semantics cannot drift. It
// neither locks nor blocks: callers serialize access and implement waiting themselves.
// A capacity (keys, and bytes of keys plus values) bounds what writes can make it hold: a
// write that would exceed it changes nothing and fails with COLLX_ERR_NO_MEMORY naming the
// limit, so a client (or a stranger on a store without a job token) cannot grow it without end.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {

struct StoreCapacity {
  uint64_t max_keys = std::numeric_limits<uint64_t>::max();
  uint64_t max_bytes = std::numeric_limits<uint64_t>::max();  // keys plus values
};

class StoreTable {
 public:
  StoreTable() = default;
  explicit StoreTable(StoreCapacity capacity) : capacity_(capacity) {}

  Status set(const std::string& key, Bytes value);
  // nullptr when the key is missing.
  const Bytes* find(const std::string& key) const;
  Status add(const std::string& key, int64_t delta, int64_t* new_value);
  // Stores `desired` when the key holds `expected` (store_compare_matches); *stored says
  // whether it did, *current receives the value held afterwards (empty when still missing).
  Status compare_set(const std::string& key, const Bytes& expected, const Bytes& desired, Bytes* current,
                     bool* stored);
  void remove(const std::string& key);
  // The first of `keys` that is missing, or nullptr when all exist.
  const std::string* first_missing(const std::vector<std::string>& keys) const;

  uint64_t keys() const { return values_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  // COLLX_ERR_NO_MEMORY when storing `value_bytes` under `key` would exceed the capacity.
  Status check_room(const std::string& key, size_t value_bytes) const;

  StoreCapacity capacity_;
  std::unordered_map<std::string, Bytes> values_;
  uint64_t bytes_ = 0;
};

}  // namespace collx
