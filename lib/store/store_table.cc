#include "lib/store/store_table.h"

#include "lib/store/store_common.h"

namespace collx {

const Bytes* StoreTable::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

Status StoreTable::add(const std::string& key, int64_t delta, int64_t* new_value) {
  int64_t existing = 0;
  COLLX_RETURN_IF_ERROR(parse_store_counter(key, find(key), &existing));
  COLLX_RETURN_IF_ERROR(add_store_counter(key, existing, delta, new_value));
  values_[key] = format_store_counter(*new_value);
  return Status::Ok();
}

bool StoreTable::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired, Bytes* current) {
  const Bytes* existing = find(key);
  if (!store_compare_matches(existing, expected)) {
    if (existing) *current = *existing;
    else current->clear();
    return false;
  }
  values_[key] = desired;
  *current = desired;
  return true;
}

const std::string* StoreTable::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& key : keys)
    if (values_.find(key) == values_.end()) return &key;
  return nullptr;
}

}  // namespace collx
