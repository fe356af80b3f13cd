/* collx parallel layer: tensor- and sequence-parallel ops (Megatron-Core mappings) on
 * row-major host or device buffers (device: queued on the thread's parallel stream,
 * collx/parallel_device.h). Included by collx/parallel.h; do not include directly.
 *
 * Activations are [rows x cols] with rows = sequence x batch (dim 0, the sequence-parallel
 * dimension) and cols the hidden (last) dimension. `tp_comm` is the tensor-parallel group
 * (collx_grid_comm(grid, COLLX_AXIS_TP)); its size t and rank r define the shards. With
 * t = 1 every op is a copy or a no-op. Ops that communicate are collective over tp_comm;
 * buffers are the caller's; inputs and outputs must not overlap unless said otherwise.
 *
 * Megatron's conjugate pairs, and the call for each direction:
 *   f  (copy_to_tp_region)          forward: nothing     backward: collx_tp_allreduce(dX)
 *   g  (reduce_from_tp_region)      forward: collx_tp_allreduce(Y)   backward: nothing
 *   split last dim (scatter_to_tp)  forward: collx_tp_split_last     backward: collx_tp_gather_last
 *   gather last dim (gather_from_tp)forward: collx_tp_gather_last    backward: collx_tp_split_last
 *   SP scatter (dim 0)              forward: collx_sp_split_first    backward: collx_sp_gather_first
 *   SP gather (dim 0)               forward: collx_sp_gather_first   backward: collx_sp_reduce_scatter_first
 *   SP reduce-scatter (dim 0)       forward: collx_sp_reduce_scatter_first backward: collx_sp_gather_first
 * ColumnParallelLinear = f (or SP gather) -> local GEMM; RowParallelLinear = local GEMM ->
 * g (or SP reduce-scatter) -> add the replicated bias. Under SP, register LayerNorm
 * weights with COLLX_TENSOR_SP_NORM and call collx_tp_finalize_grads after backward.
 * Dropout under TP: the engine owns its RNG; Megatron seeds TP-sharded regions with
 * seed + 2718 + tp_rank and replicated ones with the same seed on every TP rank. */
#ifndef COLLX_PARALLEL_TP_H_
#define COLLX_PARALLEL_TP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* In-place SUM all-reduce of count elements over tp_comm: g forward, f backward.
 * The nonblocking form collx_tp_iallreduce lets the engine overlap the dX reduction with
 * the weight-gradient GEMM (collx_wait the request before reading buf). */
COLLX_API collx_status_t collx_tp_allreduce(void* buf, size_t count, collx_datatype_t datatype,
                                            collx_comm_t tp_comm);
COLLX_API collx_status_t collx_tp_iallreduce(void* buf, size_t count, collx_datatype_t datatype,
                                             collx_comm_t tp_comm, collx_request_t* request);

/* Keep column block r of [rows x cols]: out is [rows x cols/t]. cols must be divisible by
 * t. Local (the comm gives t and r). */
COLLX_API collx_status_t collx_tp_split_last(const void* in, void* out, size_t rows, size_t cols,
                                             collx_datatype_t datatype, collx_comm_t tp_comm);
/* All-gather of the column blocks [rows x cols_local] into [rows x t*cols_local], block
 * r at columns [r*cols_local, (r+1)*cols_local). Collective. */
COLLX_API collx_status_t collx_tp_gather_last(const void* in, void* out, size_t rows, size_t cols_local,
                                              collx_datatype_t datatype, collx_comm_t tp_comm);

/* Keep row block r of [rows x cols]: out is [rows/t x cols]; rows divisible by t. Local. */
COLLX_API collx_status_t collx_sp_split_first(const void* in, void* out, size_t rows, size_t cols,
                                              collx_datatype_t datatype, collx_comm_t tp_comm);
/* All-gather on dim 0: [rows_local x cols] from each rank into [t*rows_local x cols].
 * Collective. */
COLLX_API collx_status_t collx_sp_gather_first(const void* in, void* out, size_t rows_local, size_t cols,
                                               collx_datatype_t datatype, collx_comm_t tp_comm);
/* Reduce-scatter (SUM) on dim 0: [rows x cols] from each rank; rank r gets row block r of
 * the sum, [rows/t x cols]; rows divisible by t. Collective. */
COLLX_API collx_status_t collx_sp_reduce_scatter_first(const void* in, void* out, size_t rows, size_t cols,
                                                       collx_datatype_t datatype, collx_comm_t tp_comm);

/* Vocabulary rows held by TP rank `tp_rank` of `tp_size`: [*start, *end), blocks of
 * ceil(vocab / tp_size) (the last may be shorter or empty). Pure. */
COLLX_API collx_status_t collx_tp_vocab_range(int64_t vocab, int32_t tp_size, int32_t tp_rank, int64_t* start,
                                              int64_t* end);

/* Vocab-parallel cross-entropy (Megatron _VocabParallelCrossEntropy), float32.
 * logits: [n x v_local], this rank's vocabulary columns [vocab_start, vocab_start +
 * v_local); targets: n global ids. Three all-reduces of n floats over tp_comm: MAX of the
 * row maxima, SUM of the target logit (non-zero on its owner only), SUM of
 * sum(exp(logit - max)). Writes loss[i] = log(sum_exp) - target_logit on every rank and,
 * when softmax is not NULL, this rank's softmax columns [n x v_local] for the backward.
 * A target outside [0, vocab): COLLX_ERR_INVALID_ARG (on every rank, before any
 * communication, as every rank sees the same targets). Collective. */
COLLX_API collx_status_t collx_tp_vocab_ce_fwd(const float* logits, const int64_t* targets, size_t n,
                                               size_t v_local, int64_t vocab_start, int64_t vocab,
                                               float* loss, float* softmax, collx_comm_t tp_comm);
/* dlogits[i][j] = (softmax[i][j] - [vocab_start + j == targets[i]]) * dloss[i]. Local.
 * Both calls take device buffers too (all of one kind, targets included): device kernels on
 * the thread's parallel stream; the forward waits on the host only for a copy of the
 * targets (checked before any communication). A GPU's exp/log differ from the host's by a
 * few ulp (docs/cuda.md). */
COLLX_API collx_status_t collx_tp_vocab_ce_bwd(const float* softmax, const int64_t* targets, const float* dloss,
                                               size_t n, size_t v_local, int64_t vocab_start, float* dlogits);

/* After backward under sequence parallelism: SUM all-reduce over tp_comm of the gradients
 * of every tensor of `layout` flagged COLLX_TENSOR_SP_NORM, in `buffer` (float32, the
 * layout's buffer, e.g. collx_dp_buffer), coalesced into one collective (Megatron
 * _allreduce_non_tensor_model_parallel_grads). Call before the DP reduction. Collective. */
COLLX_API collx_status_t collx_tp_finalize_grads(collx_layout_t layout, float* buffer, collx_comm_t tp_comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_TP_H_ */
