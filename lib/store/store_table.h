// StoreTable: the key-value map and the meaning of each store operation on it. The memory
// store and the TCP server both keep their keys here, so their semantics cannot drift. It
// neither locks nor blocks: callers serialize access and implement waiting themselves.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {

class StoreTable {
 public:
  void set(const std::string& key, Bytes value) { values_[key] = std::move(value); }
  // nullptr when the key is missing.
  const Bytes* find(const std::string& key) const;
  Status add(const std::string& key, int64_t delta, int64_t* new_value);
  // Returns whether `desired` was stored; *current receives the value held afterwards
  // (empty when the key is still missing).
  bool compare_set(const std::string& key, const Bytes& expected, const Bytes& desired, Bytes* current);
  void remove(const std::string& key) { values_.erase(key); }
  // The first of `keys` that is missing, or nullptr when all exist.
  const std::string* first_missing(const std::vector<std::string>& keys) const;

 private:
  std::unordered_map<std::string, Bytes> values_;
};

}  // namespace collx
