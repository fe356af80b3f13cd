// The file store's key file: what one file holds, written whole and checked whole. A file
// that was truncated, torn by a crash before it reached the disk, or written by something else
// is reported (COLLX_ERR_INTERNAL naming the file), never returned as a value.
//
//   "CLX2" | u32 key bytes | u64 value bytes | u32 CRC-32C of key and value | key | value
// (integers little-endian). The key is stored so that a file can be checked against the key
// it was looked up for (long keys are named by a hash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"
#include "lib/store/store.h"

namespace collx {
namespace file_store_format {

constexpr size_t kHeaderBytes = 20;

// CRC-32C (Castagnoli) of data[0, size), continuing from `crc` (0 to start).
uint32_t crc32c(uint32_t crc, const uint8_t* data, size_t size);

// The whole file for `key` holding `value`.
Bytes encode(const std::string& key, const Bytes& value);

// The value of `key` from the whole contents of its file `path`; COLLX_ERR_INTERNAL naming
// the path and what is wrong (size, magic, key, length, checksum) otherwise.
Status decode(const std::string& path, const std::string& key, const Bytes& contents, Bytes* value);

}  // namespace file_store_format
}  // namespace collx
