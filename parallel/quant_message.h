// The wire format of the quantized collectives: one message per quantized piece of a
// buffer (a rank's shard for the all-gather, one destination chunk for the
// reduce-scatter), self-describing so that a receiver checks it before decoding.
//
//   offset 0   4 bytes   'C' 'Q' version(1) bits(4 or 8)
//          4   uint32    block_elems
//          8   uint64    count (elements)
//         16   float32   scales[ceil(count / block_elems)]
//          .   payload   count bytes of int8, or ceil(count / 2) bytes of int4 pairs
//          .   zero padding to a multiple of 16 bytes (the next message stays aligned)
// Integers and floats in host byte order (the ranks of a job share it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collx/collx.h"

namespace collx {
namespace parallel {
namespace quant {

constexpr size_t kHeaderBytes = 16;
constexpr size_t kMinBlock = 16;                  // block_elems: a multiple of kMinBlock
constexpr size_t kMaxBlock = size_t(1) << 20;     // ... at most this

struct Format {
  int bits = 8;        // 8 or 4
  size_t block = 256;  // elements per scale
};

// "" when f is usable, else what is wrong with it.
std::string format_problem(const Format& f);
// "" for float32, bfloat16 and float16, else why the datatype is refused.
std::string datatype_problem(collx_datatype_t dt);

size_t num_blocks(size_t count, const Format& f);
size_t payload_bytes(size_t count, const Format& f);
size_t message_bytes(size_t count, const Format& f);  // header + scales + payload + padding

// Quantize count elements of `in` (float32, bfloat16 or float16) into msg
// (message_bytes(count, f) bytes, written in full, padding included).
void encode(const void* in, size_t count, collx_datatype_t dt, const Format& f, uint8_t* msg);

// Only the header of such a message (a piece that is never decoded, e.g. the own chunk of
// the reduce-scatter, still announces its format).
void encode_header(size_t count, const Format& f, uint8_t* msg);

// "" when msg's header announces count elements in format f, else what differs.
std::string header_problem(const uint8_t* msg, size_t count, const Format& f);

// Dequantize a message (header already checked) into out (count elements of dt).
void decode(const uint8_t* msg, size_t count, collx_datatype_t dt, const Format& f, void* out);
// acc[i] += dequantized element i, in float32.
void decode_add(const uint8_t* msg, size_t count, const Format& f, float* acc);

// float32 views of 16-bit buffers: dst[i] = float(src[i]) and back (round to nearest even).
void widen(const void* src, collx_datatype_t dt, size_t n, float* dst);
void narrow(const float* src, size_t n, collx_datatype_t dt, void* dst);

}  // namespace quant
}  // namespace parallel
}  // namespace collx
