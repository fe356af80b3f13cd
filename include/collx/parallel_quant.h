/* collx parallel layer: quantized communication (ZeRO++ style) on raw host buffers.
 * Included by collx/parallel.h; do not include directly. Guide: docs/parallel-quant.md.
 *
 * Symmetric block quantization: each block of block_elems elements travels as one float32
 * scale plus one int8 (or int4) per element, scale = max|x| / 127 (int4: / 7),
 * q = round_half_even(x / scale), read back as q * scale. Per element, for a block
 * without inf or NaN:
 *     |x - dequant(quant(x))| <= (1 + 2^-12) * scale / 2
 * (plus the final rounding when the output is bfloat16 or float16). Blocks with a NaN or
 * inf read back as NaN in every element; blocks whose max|x| is below 2^-100 read back
 * as zeros. Wire bytes per element: 1 (int8) or 1/2 (int4) + 4 / block_elems, plus a
 * 16-byte header per message.
 *
 *  - collx_quant_allgather (ZeRO++ qwZ): quantize the own shard, all-gather the bytes and
 *    scales, dequantize every shard (the own one too: every rank ends with bit-identical
 *    parameters).
 *  - collx_quant_reduce_scatter (ZeRO++ qgZ): quantize each destination chunk, one
 *    all-to-all of the quantized chunks, then the owner dequantizes and sums in float32
 *    (its own chunk unquantized, in rank order). Error of element i of the result
 *    (COLLX_SUM) against the exact sum: at most the sum over the other ranks r of
 *    (1 + 2^-12) * scale_r / 2 of the block holding i, plus float32 accumulation
 *    rounding; COLLX_AVG divides both by the number of ranks.
 *
 * Buffers are the caller's, read or written during the call only; the calls allocate
 * their scratch (2 x size x message bytes, plus recvcount floats for the reduce-scatter)
 * and free it before returning. Collective calls are collective over `comm`: every rank
 * must call them in the same order with the same count, datatype and config; a rank whose
 * bits or block_elems differ makes every rank that receives from it return
 * COLLX_ERR_MISMATCH naming it. One thread at a time per communicator (collx.h).
 * Errors: collx_last_error(NULL) on the calling thread. */
#ifndef COLLX_PARALLEL_QUANT_H_
#define COLLX_PARALLEL_QUANT_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collx_quant_config {
  size_t size;         /* sizeof(collx_quant_config_t) as compiled by the caller */
  int32_t bits;        /* 8 (default) or 4 */
  size_t block_elems;  /* elements per scale: a multiple of 16 from 16 to 1048576;
                          default 256 */
  int64_t timeout_ms;  /* deadline of the collective inside the call; -1 (default) = the
                          communicator's timeout */
} collx_quant_config_t;

/* Fill *config with the defaults above and config->size = size. Local; thread-safe. */
COLLX_API collx_status_t collx_quant_config_init(collx_quant_config_t* config, size_t size);

/* Bytes of one quantized message of `count` elements in format `config` (NULL = the
 * defaults): header, scales, payload and padding to a multiple of 16. Pure. */
COLLX_API collx_status_t collx_quant_packed_bytes(size_t count, const collx_quant_config_t* config,
                                                  size_t* bytes);

/* Quantize count elements of `in` (COLLX_FLOAT32, COLLX_BFLOAT16 or COLLX_FLOAT16) into
 * `packed` (collx_quant_packed_bytes bytes, any alignment), the wire format of
 * docs/parallel-quant.md. Local; in and packed must not overlap. */
COLLX_API collx_status_t collx_quant_pack(const void* in, size_t count, collx_datatype_t datatype,
                                          const collx_quant_config_t* config, void* packed);
/* Dequantize a message made by collx_quant_pack with the same count and config into
 * `out` (count elements of datatype). A header that announces another count, bits or
 * block size is COLLX_ERR_INVALID_ARG naming both. Local; no overlap. */
COLLX_API collx_status_t collx_quant_unpack(const void* packed, size_t count, collx_datatype_t datatype,
                                            const collx_quant_config_t* config, void* out);

/* recvbuf (size * sendcount elements) gets every rank's sendbuf, in rank order, each
 * quantized and dequantized (the own block too). Same datatype in and out: float32,
 * bfloat16 or float16. In place: sendbuf == recvbuf + rank * sendcount (in elements);
 * any other overlap is COLLX_ERR_INVALID_ARG. Collective. */
COLLX_API collx_status_t collx_quant_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                               collx_datatype_t datatype, collx_comm_t comm,
                                               const collx_quant_config_t* config);

/* sendbuf holds size * recvcount elements; rank r receives in recvbuf the reduction (op
 * COLLX_SUM or COLLX_AVG) over ranks of block r, computed from the other ranks' quantized
 * blocks and its own exact block, accumulated in float32. Datatypes as for the
 * all-gather. In place: recvbuf == sendbuf + rank * recvcount (in elements); any other
 * overlap is COLLX_ERR_INVALID_ARG. Collective. */
COLLX_API collx_status_t collx_quant_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                                    collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                                    const collx_quant_config_t* config);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_QUANT_H_ */
