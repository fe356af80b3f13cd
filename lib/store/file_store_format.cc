#include "lib/store/file_store_format.h"

#include <array>
#include <cstring>

#include "lib/store/store_common.h"

namespace collx {
namespace file_store_format {
namespace {

constexpr char kMagic[4] = {'C', 'L', 'X', '2'};

// The reflected CRC-32C table, built once.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_le(uint64_t v, int n, uint8_t* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get_le(const uint8_t* in, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

uint32_t checksum(const std::string& key, const uint8_t* value, size_t value_bytes) {
  uint32_t crc = crc32c(0, reinterpret_cast<const uint8_t*>(key.data()), key.size());
  return crc32c(crc, value, value_bytes);
}

}  // namespace

uint32_t crc32c(uint32_t crc, const uint8_t* data, size_t size) {
  const auto& table = crc_table();
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

Bytes encode(const std::string& key, const Bytes& value) {
  Bytes out(kHeaderBytes + key.size() + value.size());
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put_le(key.size(), 4, out.data() + 4);
  put_le(value.size(), 8, out.data() + 8);
  put_le(checksum(key, value.data(), value.size()), 4, out.data() + 16);
  std::memcpy(out.data() + kHeaderBytes, key.data(), key.size());
  if (!value.empty()) std::memcpy(out.data() + kHeaderBytes + key.size(), value.data(), value.size());
  return out;
}

Status decode(const std::string& path, const std::string& key, const Bytes& contents, Bytes* value) {
  const std::string quoted = quote_store_key(key);
  if (contents.size() < kHeaderBytes || std::memcmp(contents.data(), kMagic, sizeof kMagic) != 0)
    return make_status(COLLX_ERR_INTERNAL, "file store: %s (%zu bytes) is not a collx key file (looked up for key %s)",
                       path.c_str(), contents.size(), quoted.c_str());
  const uint64_t key_bytes = get_le(contents.data() + 4, 4);
  const uint64_t value_bytes = get_le(contents.data() + 8, 8);
  if (key_bytes != key.size() || contents.size() - kHeaderBytes < key.size() ||
      std::memcmp(contents.data() + kHeaderBytes, key.data(), key.size()) != 0)
    return make_status(COLLX_ERR_INTERNAL, "file store: %s does not hold key %s (corrupt, foreign or a hash collision)",
                       path.c_str(), quoted.c_str());
  const size_t held = contents.size() - kHeaderBytes - key.size();
  if (value_bytes != held)
    return make_status(COLLX_ERR_INTERNAL,
                       "file store: %s holds %zu value bytes but its header says %llu (truncated or corrupt); key %s",
                       path.c_str(), held, static_cast<unsigned long long>(value_bytes), quoted.c_str());
  const uint8_t* data = contents.data() + kHeaderBytes + key.size();
  const uint32_t stored = static_cast<uint32_t>(get_le(contents.data() + 16, 4));
  const uint32_t actual = checksum(key, data, held);
  if (stored != actual)
    return make_status(COLLX_ERR_INTERNAL,
                       "file store: %s fails its checksum (CRC-32C %08x, header says %08x): corrupt; key %s",
                       path.c_str(), actual, stored, quoted.c_str());
  value->assign(data, data + held);
  return Status::Ok();
}

}  // namespace file_store_format
}  // namespace collx
