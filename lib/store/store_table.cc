#include "lib/store/store_table.h"

#include <cinttypes>

#include "lib/store/store_common.h"

namespace collx {

const Bytes* StoreTable::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

Status StoreTable::check_room(const std::string& key, size_t value_bytes) const {
  const Bytes* existing = find(key);
  const uint64_t keys_after = values_.size() + (existing ? 0 : 1);
  const uint64_t bytes_after = bytes_ - (existing ? key.size() + existing->size() : 0) + key.size() + value_bytes;
  if (keys_after > capacity_.max_keys)
    return make_status(COLLX_ERR_NO_MEMORY,
                       "store full: key %s would be key %" PRIu64 " of a store limited to %" PRIu64
                       " keys (COLLX_STORE_MAX_KEYS on the store's host); remove keys or raise the limit",
                       quote_store_key(key).c_str(), keys_after, capacity_.max_keys);
  if (bytes_after > capacity_.max_bytes)
    return make_status(COLLX_ERR_NO_MEMORY,
                       "store full: %zu bytes under key %s would make the store hold %" PRIu64
                       " bytes, above its limit of %" PRIu64
                       " bytes (COLLX_STORE_MAX_BYTES on the store's host); remove keys or raise the limit",
                       value_bytes, quote_store_key(key).c_str(), bytes_after, capacity_.max_bytes);
  return Status::Ok();
}

Status StoreTable::set(const std::string& key, Bytes value) {
  COLLX_RETURN_IF_ERROR(check_room(key, value.size()));
  auto it = values_.find(key);
  if (it == values_.end()) {
    bytes_ += key.size() + value.size();
    values_.emplace(key, std::move(value));
  } else {
    bytes_ = bytes_ - it->second.size() + value.size();
    it->second = std::move(value);
  }
  return Status::Ok();
}

Status StoreTable::add(const std::string& key, int64_t delta, int64_t* new_value) {
  int64_t existing = 0, result = 0;
  COLLX_RETURN_IF_ERROR(parse_store_counter(key, find(key), &existing));
  COLLX_RETURN_IF_ERROR(add_store_counter(key, existing, delta, &result));
  COLLX_RETURN_IF_ERROR(set(key, format_store_counter(result)));
  *new_value = result;
  return Status::Ok();
}

Status StoreTable::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired, Bytes* current,
                               bool* stored) {
  *stored = false;
  const Bytes* existing = find(key);
  if (!store_compare_matches(existing, expected)) {
    if (existing) *current = *existing;
    else current->clear();
    return Status::Ok();
  }
  COLLX_RETURN_IF_ERROR(set(key, desired));
  *current = desired;
  *stored = true;
  return Status::Ok();
}

void StoreTable::remove(const std::string& key) {
  auto it = values_.find(key);
  if (it == values_.end()) return;
  bytes_ -= key.size() + it->second.size();
  values_.erase(it);
}

const std::string* StoreTable::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& key : keys)
    if (values_.find(key) == values_.end()) return &key;
  return nullptr;
}

}  // namespace collx
