/* collx parallel layer: the process grid and the flat-buffer layout planner, and (in the
 * headers included at the end) the strategies built on them.
 *
 * Include after collx/collx.h. Built only on the public C API of collx/collx.h; the same
 * conventions hold (every function returns collx_status_t; opaque handles created by one
 * call and released by one call; config structs start with `size_t size` and are filled
 * by an init function first; fields are only ever appended).
 *
 * Error messages follow collx.h's rule (docs/api-conventions.md): every failed call of this
 * layer leaves its message with the calling thread, in collx_last_error(NULL); a call on one
 * of this layer's handles leaves it with the handle too, in collx_<type>_last_error(handle)
 * (collx_grid_last_error, collx_layout_last_error, collx_dp_last_error, ...), which any
 * thread may read. Each of those given NULL returns collx_last_error(NULL).
 * When a collx call on a communicator fails inside this layer, its collx_last_error text
 * is copied into this layer's message, and collx_last_error(comm) still holds it too.
 *
 * Ranks in this header are int32_t; coordinate arrays are indexed by COLLX_DIM_*.
 */
#ifndef COLLX_PARALLEL_H_
#define COLLX_PARALLEL_H_

#include <stddef.h>
#include <stdint.h>

#include "collx/collx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Process grid (Megatron-Core parallel_state)
 * ------------------------------------------------------------------------------------- */

/* A process grid over a world communicator: coordinates and sub-communicators. */
typedef struct collx_grid_s* collx_grid_t;

/* Axes, as a bit mask for collx_grid_comm. */
#define COLLX_AXIS_TP 0x1u
#define COLLX_AXIS_CP 0x2u
#define COLLX_AXIS_EP 0x4u
#define COLLX_AXIS_DP 0x8u
#define COLLX_AXIS_PP 0x10u
/* Expert data parallel (Megatron's get_expert_data_parallel_group): the replicas of one
 * expert, over which the expert layers' gradients are all-reduced. Only meaningful with
 * COLLX_AXIS_EP / COLLX_AXIS_TP / COLLX_AXIS_PP in the expert layout below. */
#define COLLX_AXIS_EDP 0x20u

/* Expert layers (Megatron-Core's expert rank generator). EP is carved out of the
 * data-parallel ranks: the dense layers see tp, cp, dp, pp (ep counts as 1); the expert
 * layers see tp, ep, edp, pp with ep * edp == cp * dp (context parallelism folds into the
 * expert layers' data parallelism, as in Megatron). Each DP|CP group, ordered by world
 * rank (index f), is cut into EP groups: f = ep_idx + edp_idx*EP when "ep" comes before
 * "dp" in `order` (the default: with cp = 1 an EP group is ep consecutive dp ranks, and an
 * expert-data-parallel group is the dp ranks with the same ep index), f = edp_idx +
 * ep_idx*EDP otherwise. The expert layers keep the dense tp and pp coordinates. With the
 * default order this is exactly Megatron's expert generator (rank = tp + ep_idx*TP +
 * edp_idx*TP*EP + pp*TP*EP*EDP). Rules: ep >= 1 divides cp*dp (Megatron's
 * world % (tp*ep*pp) == 0, expert tp = tp); with ep > 1 the order must name "ep". */

/* Index of each axis in a coordinate array (int32_t coords[COLLX_GRID_NUM_DIMS]). */
#define COLLX_DIM_TP 0
#define COLLX_DIM_CP 1
#define COLLX_DIM_EP 2
#define COLLX_DIM_DP 3
#define COLLX_DIM_PP 4
#define COLLX_GRID_NUM_DIMS 5

/* The default order: the first token varies fastest (TP innermost, as Megatron). */
#define COLLX_GRID_DEFAULT_ORDER "tp-cp-ep-dp-pp"

typedef struct collx_grid_config {
  size_t size;       /* sizeof(collx_grid_config_t) as compiled by the caller */
  int32_t tp;        /* tensor-parallel size, >= 1 (default 1) */
  int32_t cp;        /* context-parallel size, >= 1 (default 1) */
  int32_t ep;        /* expert-parallel size, >= 1, divides cp*dp (default 1); not a factor
                        of the world size (EP is carved out of cp*dp, see above) */
  int32_t dp;        /* data-parallel size, >= 1; 0 = world_size / (tp*cp*pp) (default 0) */
  int32_t pp;        /* pipeline-parallel size, >= 1 (default 1) */
  const char* order; /* '-'-separated permutation of "tp","cp","ep","dp","pp", first token
                        fastest; tokens of size-1 axes may be left out (appended at the
                        end). NULL = COLLX_GRID_DEFAULT_ORDER. At most 80 characters. */
} collx_grid_config_t;

/* Fill *config with the defaults above and config->size = size (sizeof as the caller knows
 * it). Local; thread-safe. */
COLLX_API collx_status_t collx_grid_config_init(collx_grid_config_t* config, size_t size);

/* Build this rank's grid. Collective over `world`: every rank must call it, with the same
 * config. The grid borrows `world` (does not own it; `world` must outlive the grid) and
 * owns the sub-communicators it creates.
 *
 * Steps, identical on every rank:
 *  1. allgather of each rank's config (sizes, order and its hash); a rank whose config
 *     differs from rank 0's gives COLLX_ERR_INVALID_USAGE on EVERY rank, naming that rank
 *     and both configs;
 *  2. checks tp*cp*dp*pp == world size (dp = 0: dp is the remainder, which must be a
 *     whole number >= 1), sizes >= 1, the expert rules above and a valid order; any
 *     failure gives COLLX_ERR_INVALID_ARG on every rank;
 *  3. Megatron's mixed-radix coordinates: rank = sum coord[d] * stride[d], the first
 *     token of `order` fastest (default: rank = tp + cp*TP + dp*TP*CP + pp*TP*CP*DP);
 *  4. one collx_comm_split of `world` per axis set, in this fixed order:
 *     TP, CP, DP, PP, DP|CP, TP|PP, TP|CP, TP|CP|DP, TP|CP|DP|PP, then the expert sets
 *     EP, TP|EP, EDP (created for every ep, 1 included).
 * A NULL argument or a too small config->size gives COLLX_ERR_INVALID_ARG on the calling
 * rank only, before any communication (the other ranks then time out in step 1).
 * Errors: collx_last_error(NULL) on this thread. Not thread-safe with other calls on
 * `world` (it runs collectives on it). */
COLLX_API collx_status_t collx_grid_create(collx_comm_t world, const collx_grid_config_t* config,
                                           collx_grid_t* grid);

/* Destroy the sub-communicators and the grid (not `world`). Local. NULL is ignored. No
 * other thread may use the grid or its sub-communicators during or after the call. */
COLLX_API collx_status_t collx_grid_destroy(collx_grid_t grid);

/* The communicator of the ranks that differ from this rank only on the axes in `axes`
 * (COLLX_AXIS_* mask), ordered by world rank (= Megatron's group order). A mask with
 * COLLX_AXIS_EP or COLLX_AXIS_EDP is read in the expert layout (its TP and PP bits are the
 * expert layers' tp and pp): EP = Megatron's expert-model-parallel group (the MoE
 * all-to-all), TP|EP = its expert-tensor-and-model-parallel group, EDP = its
 * expert-data-parallel group (expert gradients). Every other mask is read in the dense
 * layout. The handle is borrowed: owned by the grid, valid until collx_grid_destroy, never
 * destroyed by the caller. Only the sets pre-created by collx_grid_create are available;
 * any other set (or an empty one) gives COLLX_ERR_INVALID_ARG naming it.
 * Local, no communication; thread-safe (the grid is read-only after creation), but the
 * returned communicator follows collx.h's one-thread-at-a-time rule. */
COLLX_API collx_status_t collx_grid_comm(collx_grid_t grid, uint32_t axes, collx_comm_t* comm);

/* Sizes of the axes after resolving dp = 0 (indexed by COLLX_DIM_*); dims[COLLX_DIM_EP]
 * is ep (not a factor of the world size). Local; thread-safe. */
COLLX_API collx_status_t collx_grid_dims(collx_grid_t grid, int32_t dims[COLLX_GRID_NUM_DIMS]);

/* Coordinates of world rank `rank` (indexed by COLLX_DIM_*), and the inverse. Pure index
 * math; local; thread-safe. COLLX_ERR_INVALID_ARG for a rank or coordinate out of range.
 * coords[COLLX_DIM_EP] is the rank's expert-parallel index (from the expert layout);
 * collx_grid_rank_of checks it is in [0, ep) but does not use it: tp, cp, dp and pp
 * determine the rank. */
COLLX_API collx_status_t collx_grid_coords(collx_grid_t grid, int32_t rank,
                                           int32_t coords[COLLX_GRID_NUM_DIMS]);
COLLX_API collx_status_t collx_grid_rank_of(collx_grid_t grid,
                                            const int32_t coords[COLLX_GRID_NUM_DIMS],
                                            int32_t* rank);

/* The expert layout: dims = {tp, 1, ep, edp, pp} (indexed by COLLX_DIM_*, the DP entry is
 * the expert-data-parallel size cp*dp/ep), and the expert coordinates of world rank `rank`
 * (the DP entry is the expert-data-parallel index, the CP entry 0). Pure index math;
 * local; thread-safe. COLLX_ERR_INVALID_ARG for a rank out of range. */
COLLX_API collx_status_t collx_grid_expert_dims(collx_grid_t grid, int32_t dims[COLLX_GRID_NUM_DIMS]);
COLLX_API collx_status_t collx_grid_expert_coords(collx_grid_t grid, int32_t rank,
                                                  int32_t coords[COLLX_GRID_NUM_DIMS]);

/* Message of the last failed call on `grid` (grid == NULL: collx_last_error(NULL)). Valid
 * until the next failed call on the same grid; "" when none. */
COLLX_API const char* collx_grid_last_error(collx_grid_t grid);

/* ---------------------------------------------------------------------------------------
 * Flat-buffer layout planner (shared by the DP bucketer, ZeRO and the distributed
 * optimizer). Pure, local and deterministic: identical inputs give identical layouts on
 * every rank; collx_layout_verify checks that the inputs are identical.
 *
 * A layout places tensors in one flat buffer (in elements; tensors of different datatypes
 * share the element index space, the caller maps it to bytes per buffer) and cuts it into
 * buckets. All offsets and counts are in elements.
 * ------------------------------------------------------------------------------------- */

typedef struct collx_layout_s* collx_layout_t;

/* How buckets are sharded over the dp ranks. */
typedef enum collx_partition {
  /* Megatron distributed optimizer, DeepSpeed ZeRO-1/2: each padded bucket is cut into
   * dp_size equal contiguous owner ranges; a tensor may straddle owners. */
  COLLX_PART_FLAT = 0,
  /* ZeRO-3, FSDP2: each tensor is padded to ceil(n/dp)*dp and rank r owns chunk r of it. */
  COLLX_PART_PER_TENSOR = 1
} collx_partition_t;

/* Tensor flags: stored and hashed by the planner; the dp/zero/tp layers give them their
 * meaning (the planner itself does not look at them). */
#define COLLX_TENSOR_TP_SHARDED 0x1u
#define COLLX_TENSOR_TP_REPLICATED 0x2u
#define COLLX_TENSOR_SP_NORM 0x4u
#define COLLX_TENSOR_SHARED 0x8u
#define COLLX_TENSOR_EXPERT 0x10u
#define COLLX_TENSOR_PERSISTENT 0x20u

typedef struct collx_layout_config {
  size_t size;               /* sizeof(collx_layout_config_t) as compiled by the caller */
  int32_t dp_size;           /* number of owner ranks, >= 1 (no default: init sets 0) */
  int32_t reverse;           /* 1 = place tensors in reverse registration order, as DDP and
                                Megatron (the last-registered gradient is ready first);
                                0 = registration order. Default 1. */
  int32_t partition;         /* collx_partition_t; default COLLX_PART_FLAT */
  size_t align_elems;        /* every tensor starts at a multiple of this buffer offset;
                                0 or 1 = no alignment. Default 64 (Megatron). */
  size_t bucket_elems;       /* close a bucket once it holds >= this many elements;
                                0 = one bucket. Default 0. */
  size_t first_bucket_elems; /* the same for bucket 0 (DDP's small first bucket);
                                0 = bucket_elems. Default 0. */
  size_t bucket_pad;         /* each bucket's padded size is a multiple of this; must be a
                                multiple of dp_size for FLAT; 0 = lcm(dp_size, 128).
                                Default 0. */
} collx_layout_config_t;

/* Fill *config with the defaults above and config->size = size. Local; thread-safe. */
COLLX_API collx_status_t collx_layout_config_init(collx_layout_config_t* config, size_t size);

/* A new, empty layout; the config is copied. COLLX_ERR_INVALID_ARG for dp_size < 1, an
 * unknown partition, or a FLAT bucket_pad that is not a multiple of dp_size (message in
 * collx_last_error(NULL) on this thread, since no layout exists). Local. */
COLLX_API collx_status_t collx_layout_create(const collx_layout_config_t* config,
                                             collx_layout_t* layout);
/* Release the layout. Local; NULL is ignored. */
COLLX_API collx_status_t collx_layout_destroy(collx_layout_t layout);

/* Register a tensor of `numel` elements (0 allowed). Ids are the caller's (unique in the
 * layout; duplicate: COLLX_ERR_INVALID_ARG). After finalize: COLLX_ERR_INVALID_USAGE.
 * Local. Building (add, finalize) must be done by one thread at a time. */
COLLX_API collx_status_t collx_layout_add(collx_layout_t layout, uint64_t tensor_id, size_t numel,
                                          collx_datatype_t datatype, uint32_t flags);

/* Compute the layout: offsets in (reverse) registration order aligned to align_elems,
 * buckets cut after the tensor that makes a bucket reach its limit, bucket ends padded to
 * bucket_pad, owner ranges. A second call: COLLX_ERR_INVALID_USAGE. Local. After it the
 * layout is read-only and the queries below may run on any thread. */
COLLX_API collx_status_t collx_layout_finalize(collx_layout_t layout);

/* Queries: COLLX_ERR_INVALID_USAGE before finalize; COLLX_ERR_INVALID_ARG for an unknown
 * id, bucket or rank. Output pointers may be NULL when not wanted. Local; thread-safe. */

/* Where the tensor lives in the buffer: [offset, offset + numel) (numel unpadded). */
COLLX_API collx_status_t collx_layout_tensor(collx_layout_t layout, uint64_t tensor_id,
                                             size_t* offset, size_t* numel);
/* The bucket holding the tensor, and the space it takes in the buffer: numel for FLAT,
 * ceil(numel/dp)*dp for PER_TENSOR. */
COLLX_API collx_status_t collx_layout_tensor_bucket(collx_layout_t layout, uint64_t tensor_id,
                                                    size_t* bucket, size_t* padded_numel);
/* Total buffer size (sum of the padded buckets) in elements. */
COLLX_API collx_status_t collx_layout_total(collx_layout_t layout, size_t* total_elems);
COLLX_API collx_status_t collx_layout_num_buckets(collx_layout_t layout, size_t* num_buckets);
/* Bucket b occupies [start, start + padded_numel); its data (tensors and their alignment
 * gaps) end at start + numel; the rest is padding (zero it; exclude it from norms). */
COLLX_API collx_status_t collx_layout_bucket(collx_layout_t layout, size_t bucket, size_t* start,
                                             size_t* padded_numel, size_t* numel);
/* FLAT: the owner range of `rank` in bucket b, [start, start + count) with
 * count = padded_numel / dp_size and start = bucket start + rank * count.
 * PER_TENSOR: COLLX_ERR_INVALID_USAGE (a rank's share is not contiguous; use
 * collx_layout_tensor_shard). */
COLLX_API collx_status_t collx_layout_owned(collx_layout_t layout, size_t bucket, int32_t rank,
                                            size_t* start, size_t* count);
/* The part of the tensor that `rank` owns: elements [tensor_offset, tensor_offset + count)
 * of the tensor, at buffer offset buffer_offset. FLAT: the intersection of the tensor with
 * the rank's owner range. PER_TENSOR: chunk `rank` of the padded tensor, clipped to the
 * tensor (buffer_offset = offset + rank * chunk). count may be 0 (then tensor_offset and
 * buffer_offset are still within or at the end of the tensor). Summed over ranks, count
 * equals the tensor's numel. */
COLLX_API collx_status_t collx_layout_tensor_shard(collx_layout_t layout, uint64_t tensor_id,
                                                   int32_t rank, size_t* tensor_offset,
                                                   size_t* buffer_offset, size_t* count);

/* 64-bit FNV-1a hash of the config and of (id, numel, datatype, flags) of every tensor in
 * registration order. Works before or after finalize. Local; thread-safe after finalize. */
COLLX_API collx_status_t collx_layout_fingerprint(collx_layout_t layout, uint64_t* fingerprint);

/* Check that every rank of `comm` built the same layout inputs. Collective over `comm`
 * (allgather of fingerprints; on a difference, allgathers of the configs and tensor
 * records, so every rank computes the same message). Works before or after finalize.
 * On a difference every rank returns COLLX_ERR_MISMATCH with a message naming the first
 * differing config field or tensor, e.g. "rank 2 registered tensor 7 with numel 1000 but
 * rank 0 with numel 1024" (collx_layout_last_error). A failure of the communicator
 * returns its status, with collx_last_error(comm) copied into the layout's message. */
COLLX_API collx_status_t collx_layout_verify(collx_layout_t layout, collx_comm_t comm);

/* Message of the last failed call on `layout` ("" when none; NULL layout:
 * collx_last_error(NULL)). Valid until the next failed call on the same layout;
 * when several threads query one layout at once, the message may be any thread's. */
COLLX_API const char* collx_layout_last_error(collx_layout_t layout);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The strategies built on the grid and the layout, one header each. */
#include "collx/parallel_dp.h"
#include "collx/parallel_mp.h"
#include "collx/parallel_zero.h"
#include "collx/parallel_tp.h"
#include "collx/parallel_pp.h"
#include "collx/parallel_cp.h"
#include "collx/parallel_moe.h"
#include "collx/parallel_quant.h"
#include "collx/parallel_device.h"

#endif /* COLLX_PARALLEL_H_ */
