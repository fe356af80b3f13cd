/* collx: collective communication with a C ABI.
 *
 * Conventions that hold for every declaration below and in every collx/ header; they are
 * written out, with the names changed before 1.0, in docs/api-conventions.md:
 *  - Every function returns collx_status_t (0 = success, > 0 = a state, < 0 = an error).
 *    A failed call leaves its message with the calling thread: collx_last_error(NULL)
 *    returns it. A call on a handle leaves it with the handle too: collx_last_error(comm)
 *    for a communicator, collx_<type>_last_error(handle) for the parallel layer's handles.
 *  - Handles are opaque pointers. A handle is created by exactly one call and released by
 *    exactly one call, collx_<type>_destroy (collx_request_free and collx_cp_ring_finish,
 *    which also end an operation, are the two exceptions); nothing else frees it.
 *  - Argument order: constructors take the communicator first (collx_comm_split(comm, ...),
 *    collx_dp_create(dp_comm, ...)); calls on a handle take the handle first; collectives
 *    and point to point take their data arguments, then the communicator, then the options
 *    and the request. Nonblocking calls are named collx_i<name> and end with the request.
 *  - Counts, ranks and indices in signatures are int32_t (or size_t for element counts);
 *    plain int is used only for yes/no flags (collx_test's done) and version numbers.
 *  - Structs that cross the ABI start with `size_t size` (sizeof the struct the caller
 *    compiled with) and are filled by an init function first, so a struct can be built
 *    field by field from any language: call the init function, then set fields. Fields are
 *    only ever appended, never reordered. All enum-valued fields are int32_t.
 *  - Counts are in elements of the given datatype, never bytes.
 *  - Buffers are borrowed: collx never keeps a pointer to a caller's buffer after the call
 *    (blocking forms) or after the request completes (nonblocking forms).
 *  - Thread safety: different communicators may be used from different threads freely.
 *    One communicator may be used by one thread at a time, except for collx_comm_abort,
 *    collx_test, collx_wait, collx_request_free, collx_last_error and the rank/size
 *    queries, which any thread may call at any time.
 *  - Every blocking call ends by a deadline (the communicator's timeout unless the call's
 *    options give another) with COLLX_ERR_TIMEOUT naming what it waited for.
 */
#ifndef COLLX_COLLX_H_
#define COLLX_COLLX_H_

#include <stddef.h>
#include <stdint.h>

#include "collx/collx_status.h"
#include "collx/collx_version.h"

#if defined(_WIN32)
#define COLLX_API
#else
#define COLLX_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Handles
 * ------------------------------------------------------------------------------------- */

/* A group of ranks that run collectives together. */
typedef struct collx_comm_s* collx_comm_t;
/* An operation started by a collx_i* call; completed by collx_test/collx_wait. */
typedef struct collx_request_s* collx_request_t;
/* A key-value store used to bootstrap communicators (TCP, file or in-memory). */
typedef struct collx_store_s* collx_store_t;

/* ---------------------------------------------------------------------------------------
 * Version and status
 * ------------------------------------------------------------------------------------- */

/* Version of the library actually loaded (may differ from the COLLX_VERSION_* macros the
 * caller compiled with; the same major version means the same ABI). Any pointer may be NULL. */
COLLX_API collx_status_t collx_get_version(int* major, int* minor, int* patch);
/* "MAJOR.MINOR.PATCH"; a static string, never freed. */
COLLX_API const char* collx_get_version_string(void);

/* "COLLX_ERR_TIMEOUT" etc.; a static string. Unknown codes give "COLLX_UNKNOWN_STATUS". */
COLLX_API const char* collx_status_name(collx_status_t status);
/* A one-line description of the code; a static string. */
COLLX_API const char* collx_status_string(collx_status_t status);

/* comm NULL: the message of the last failed call of the calling thread, any call of any
 * collx header (collx_comm_create, a collective, collx_topo_load, collx_dp_finish, ...);
 * "" when none failed yet. Valid until the thread's next failed call; other threads'
 * failures never change it.
 * comm not NULL: the message of the last failed call on `comm`; "" when none failed yet.
 * The communicator keeps it until the next failed call on it (collx_test and collx_wait of
 * its requests included); successful calls leave it. Any thread may read it and every
 * thread reads the same message. The string belongs to the communicator and stays valid
 * until the next failed call on `comm` or collx_comm_destroy(comm), whichever comes first:
 * copy it to keep it longer, and do not read it while another thread may fail a call on
 * `comm`. Calls of the parallel layer that take a communicator keep their own message with
 * the thread; `comm` keeps the message of a collx call that failed on it inside them. */
COLLX_API const char* collx_last_error(collx_comm_t comm);

/* ---------------------------------------------------------------------------------------
 * Datatypes, reduction operations, algorithms, memory kinds, transports
 * ------------------------------------------------------------------------------------- */

typedef enum collx_datatype {
  COLLX_INT8 = 0,
  COLLX_UINT8 = 1,
  COLLX_INT32 = 2,
  COLLX_UINT32 = 3,
  COLLX_INT64 = 4,
  COLLX_UINT64 = 5,
  COLLX_FLOAT16 = 6,  /* IEEE 754 binary16; reduced in float32, rounded once to nearest even */
  COLLX_BFLOAT16 = 7, /* bfloat16; reduced in float32, rounded once to nearest even */
  COLLX_FLOAT32 = 8,
  COLLX_FLOAT64 = 9,
  COLLX_NUM_DATATYPES = 10
} collx_datatype_t;

typedef enum collx_op {
  COLLX_SUM = 0,
  COLLX_PROD = 1,
  COLLX_MIN = 2,
  COLLX_MAX = 3,
  /* Sum divided by the number of ranks. Integers: the sum is divided with truncation
   * toward zero (as NCCL). Floating point: computed in the type's precision. */
  COLLX_AVG = 4,
  /* Each rank's input is multiplied by collx_opts_t.premul_scalar (converted to the
   * datatype) before the sum, as NCCL's ncclRedOpCreatePreMulSum with a host scalar. */
  COLLX_PREMUL_SUM = 5,
  COLLX_NUM_OPS = 6
} collx_op_t;

/* Collective kinds, used in options, in explanations and in error messages. */
typedef enum collx_coll {
  COLLX_COLL_ALLREDUCE = 0,
  COLLX_COLL_REDUCE_SCATTER = 1,
  COLLX_COLL_ALLGATHER = 2,
  COLLX_COLL_BROADCAST = 3,
  COLLX_COLL_REDUCE = 4,
  COLLX_COLL_ALLTOALL = 5,
  COLLX_COLL_BARRIER = 6,
  COLLX_COLL_SEND = 7,
  COLLX_COLL_RECV = 8,
  COLLX_COLL_GATHER = 9,
  COLLX_COLL_SCATTER = 10,
  COLLX_COLL_ALLGATHERV = 11,
  COLLX_COLL_ALLTOALLV = 12,
  COLLX_COLL_REDUCE_SCATTERV = 13,
  COLLX_COLL_GATHERV = 14,
  COLLX_COLL_SCATTERV = 15,
  COLLX_NUM_COLLS = 16
} collx_coll_t;

/* Algorithms. COLLX_ALGO_AUTO lets the library choose by collective and size; the others
 * force a schedule (COLLX_ERR_INVALID_ARG when it does not implement that collective).
 * The environment variable COLLX_ALGO overrides AUTO (see collx-info). Each comment lists
 * the collectives the algorithm implements, then what it does: the library's registry
 * (docs/algorithms.md) and a test keep the lists equal. */
typedef enum collx_algorithm {
  COLLX_ALGO_AUTO = 0,
  COLLX_ALGO_RING = 1,               /* allreduce, reduce_scatter, allgather: ring, pipelined (large messages) */
  COLLX_ALGO_RECURSIVE_DOUBLING = 2, /* allreduce: log2 p whole-vector exchanges (small messages) */
  COLLX_ALGO_BINOMIAL = 3,           /* broadcast, reduce: binomial tree */
  COLLX_ALGO_PAIRWISE = 4,           /* alltoall, allgatherv, alltoallv, reduce_scatterv: step s pairs r, r+s */
  COLLX_ALGO_DISSEMINATION = 5,      /* barrier: log2 p rounds */
  COLLX_ALGO_DIRECT = 6,             /* send, recv, gather, scatter, gatherv, scatterv: the root
                                        exchanges with every rank directly */
  COLLX_ALGO_RABENSEIFNER = 7,       /* allreduce: recursive halving + doubling (large messages) */
  COLLX_ALGO_DOUBLE_TREE = 8,        /* allreduce: two pipelined binary trees (NCCL's double binary tree) */
  COLLX_ALGO_SHARED_MEMORY = 9,      /* allreduce, reduce_scatter, allgather: every rank reads its peers'
                                        data in shared memory (one host, shm transport only) */
  COLLX_ALGO_HIERARCHICAL = 10,      /* allreduce: within each host, across hosts, within each host
                                        (communicators spanning hosts) */
  COLLX_NUM_ALGORITHMS = 11
} collx_algorithm_t;

/* Where a buffer lives. AUTO asks the library to find out (host unless CUDA says so). */
typedef enum collx_mem_kind {
  COLLX_MEM_AUTO = 0,
  COLLX_MEM_HOST = 1,
  COLLX_MEM_CUDA = 2
} collx_mem_kind_t;

/* Zero-copy host buffers. Memory from collx_mem_alloc lives in a memory file that the other
 * ranks on this host can map: a shared-memory collective (COLLX_ALGO_SHARED_MEMORY, the
 * default on one host) whose peers' buffers lie in such memory reads and reduces their data
 * straight from it, with no copy through the kernel or a bounce buffer. Any buffer works with
 * any collective; zero-copy is taken per peer where that peer's buffer is from collx_mem_alloc
 * and the call is large enough to read peers' buffers in place (64 KiB per peer), else data is
 * copied as for ordinary memory. Like MPI_Alloc_mem.
 *  - collx_mem_alloc: *ptr = page-aligned, zero-filled memory of at least `bytes` (> 0) bytes,
 *    usable as any host buffer (also with other libraries). Where the kernel has no memory
 *    files the memory is private (still valid, never zero-copy; a warning is logged once).
 *    Errors: COLLX_ERR_INVALID_ARG (ptr NULL, bytes 0), COLLX_ERR_NO_MEMORY.
 *  - collx_mem_free: releases it; NULL is a no-op; a pointer not from collx_mem_alloc (or
 *    freed already) is COLLX_ERR_INVALID_ARG and nothing is freed. A buffer must not be freed
 *    while a collective uses it (as with any buffer). A peer that mapped it may keep its pages
 *    alive (not its contents' meaning) until it maps other buffers or its communicator ends.
 *  - Threads: both are thread-safe and need no communicator; after an error,
 *    collx_last_error(NULL) on the calling thread says what was wrong.
 *  - Who may map: peers need the permission that cross-memory attach needs (same user, ptrace
 *    allowed); without it they copy, as for ordinary memory.
 *  - Cost: each allocation holds one file descriptor until it is freed; where the process is
 *    out of descriptors the memory is private (as above). Pages are 4 KiB (no huge pages). */
COLLX_API collx_status_t collx_mem_alloc(size_t bytes, void** ptr);
COLLX_API collx_status_t collx_mem_free(void* ptr);

/* Transports, as a bit mask for collx_config_t.transports. */
#define COLLX_TRANSPORT_TCP 0x1u
#define COLLX_TRANSPORT_SHM 0x2u
#define COLLX_TRANSPORT_UCX 0x4u
#define COLLX_TRANSPORT_NCCL 0x8u

/* Name of a datatype ("float32"), op ("sum"), collective ("allreduce") or algorithm
 * ("ring"); static strings; "unknown" for values out of range. */
COLLX_API const char* collx_datatype_name(collx_datatype_t datatype);
COLLX_API const char* collx_op_name(collx_op_t op);
COLLX_API const char* collx_coll_name(collx_coll_t coll);
COLLX_API const char* collx_algorithm_name(collx_algorithm_t algorithm);
/* Size in bytes of one element; 0 for an unknown datatype. */
COLLX_API size_t collx_datatype_size(collx_datatype_t datatype);
/* Parse a name as printed by the *_name functions (case-insensitive; "half", "float",
 * "double", "bf16", "fp16" are accepted too). COLLX_ERR_INVALID_ARG for unknown names. */
COLLX_API collx_status_t collx_datatype_from_name(const char* name, collx_datatype_t* out);
COLLX_API collx_status_t collx_op_from_name(const char* name, collx_op_t* out);
COLLX_API collx_status_t collx_algorithm_from_name(const char* name, collx_algorithm_t* out);

/* ---------------------------------------------------------------------------------------
 * Bootstrap store
 * ------------------------------------------------------------------------------------- */

/* Connect to (is_server = 0) or host (is_server = 1) a TCP store at "host:port".
 * A hosted server runs on a background thread until collx_store_destroy and every
 * communicator created from the store are gone. timeout_ms bounds the connection (< 0:
 * the default COLLX_TIMEOUT_MS). */
COLLX_API collx_status_t collx_store_create_tcp(const char* addr, int is_server, int64_t timeout_ms,
                                                collx_store_t* out);
/* A store kept as files in a directory shared by every rank (created if missing, mode 0700;
 * files 0600). COLLX_ERR_INVALID_USAGE when the directory belongs to another user or other
 * users may write to it (they could forge keys). */
COLLX_API collx_status_t collx_store_create_file(const char* directory, collx_store_t* out);
/* A store in this process's memory, for ranks run as threads of one process. */
COLLX_API collx_status_t collx_store_create_memory(collx_store_t* out);
/* Release the caller's reference. Communicators created from the store keep their own. */
COLLX_API collx_status_t collx_store_destroy(collx_store_t store);

/* Key-value operations. Values are bytes; keys are NUL-terminated strings (at most 4096
 * bytes). All are thread-safe on one store handle. */
COLLX_API collx_status_t collx_store_set(collx_store_t store, const char* key, const void* value,
                                         size_t value_size);
/* Waits up to timeout_ms (< 0: COLLX_TIMEOUT_MS) for the key, then copies at most
 * `capacity` bytes to `value` and its full size to *value_size. */
COLLX_API collx_status_t collx_store_get(collx_store_t store, const char* key, void* value,
                                         size_t capacity, size_t* value_size, int64_t timeout_ms);
/* Adds `delta` to the integer stored as decimal text under key (0 when missing). */
COLLX_API collx_status_t collx_store_add(collx_store_t store, const char* key, int64_t delta,
                                         int64_t* new_value);
/* Waits until every key exists, or COLLX_ERR_TIMEOUT naming the first missing one. */
COLLX_API collx_status_t collx_store_wait(collx_store_t store, const char* const* keys,
                                          size_t num_keys, int64_t timeout_ms);
COLLX_API collx_status_t collx_store_delete(collx_store_t store, const char* key);

/* ---------------------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------------------- */

/* How to create a communicator. Fill with collx_config_init, then set fields; a field left
 * at its "unset" value takes the environment's value or the default. */
typedef struct collx_config {
  size_t size;          /* sizeof(collx_config_t) as compiled by the caller */
  uint32_t version;     /* COLLX_VERSION_CODE of the caller's header */
  int32_t rank;         /* this process's rank in [0, world_size); -1 = unset */
  int32_t world_size;   /* number of ranks; -1 = unset */
  const char* store_addr; /* "host:port" of the TCP store; NULL = unset. Rank 0 hosts the
                             store there unless a server already listens (collx-run). */
  collx_store_t store;  /* an existing store to bootstrap through (overrides store_addr);
                           the communicator takes its own reference */
  int64_t timeout_ms;   /* default deadline of every blocking call; -1 = COLLX_TIMEOUT_MS */
  uint32_t transports;  /* COLLX_TRANSPORT_* mask allowed; 0 = COLLX_TRANSPORTS or all */
  int32_t device;       /* CUDA device of this communicator's device buffers: >= 0 binds it
                           to that device (buffers on another device are refused with
                           COLLX_ERR_INVALID_ARG, as NCCL binds a communicator to one GPU);
                           -1 (default) = whichever device owns each call's buffers */
  const char* name;     /* label used in logs and errors; NULL = "world" or derived */
} collx_config_t;

/* Fill *config with "unset" values and config->size = size. `size` must be
 * sizeof(collx_config_t) as the caller knows it (older, smaller structs are accepted). */
COLLX_API collx_status_t collx_config_init(collx_config_t* config, size_t size);

/* Create this rank's member of a communicator of config->world_size ranks. Blocks until
 * every rank has joined (or the timeout expires, naming the ranks that did not).
 * Every rank must call it with the same world_size and store. */
COLLX_API collx_status_t collx_comm_create(const collx_config_t* config, collx_comm_t* comm);

/* As collx_comm_create with rank, size and store taken from the environment: COLLX_RANK,
 * COLLX_WORLD_SIZE, COLLX_STORE_ADDR; else torchrun's RANK, WORLD_SIZE, MASTER_ADDR and
 * MASTER_PORT (the collx store then listens on MASTER_PORT + 1, as torchrun's own store
 * holds MASTER_PORT). `config` may be NULL; its set fields take precedence. */
COLLX_API collx_status_t collx_comm_create_from_env(const collx_config_t* config,
                                                    collx_comm_t* comm);

/* Color value that keeps a rank out of every new communicator of a split. */
#define COLLX_SPLIT_NOCOLOR (-1)

/* MPI_Comm_split: ranks passing the same color form a new communicator, ordered by key
 * then by their rank in `comm`. Collective over `comm`. A rank passing COLLX_SPLIT_NOCOLOR
 * gets *newcomm = NULL. The new communicator is independent of `comm` (either may be
 * destroyed first). */
COLLX_API collx_status_t collx_comm_split(collx_comm_t comm, int32_t color, int32_t key,
                                          collx_comm_t* newcomm);
/* A new communicator with the same ranks. Collective over `comm`. */
COLLX_API collx_status_t collx_comm_dup(collx_comm_t comm, collx_comm_t* newcomm);

/* ULFM's MPIX_Comm_shrink: a new communicator of the ranks of `comm` that are still there.
 *  - Who calls it: every surviving rank of `comm`, collectively (each once per shrink, in the
 *    same order as its other shrinks of `comm`). `comm` may be failed (typically after a
 *    peer died: COLLX_ERR_REMOTE) or healthy (then, when every rank calls it, the result has
 *    the same size). Its transport is not used: the ranks agree through the job's store.
 *  - Members: the ranks that called it, agreed by all of them even when they saw different
 *    failures. A rank that has not called it is left out at once when its process is known
 *    to have exited (same host), else when timeout_ms expires: a rank that is alive but
 *    never calls (or calls after the others' deadline) is excluded, and its own later call
 *    fails with COLLX_ERR_REMOTE naming the members. New ranks follow the old rank order.
 *  - timeout_ms: how long to wait for ranks that did not call (< 0: the communicator's
 *    timeout); creating the new communicator once agreed is bounded by the communicator's
 *    timeout. A shrink on a healthy communicator where a rank is slow to call therefore
 *    excludes it after timeout_ms.
 *  - Errors: COLLX_ERR_INVALID_ARG for a NULL comm or newcomm; the store's error when it
 *    cannot be reached: if the process hosting it died (rank 0 unless collx-run or a store
 *    handle provides it), shrink cannot work and the message says so.
 *  - Threads: like every call on `comm` (one thread at a time); not ordered with operations
 *    still queued on `comm`.
 *  - Ownership: *newcomm is a new handle (NULL on error) released with collx_comm_destroy;
 *    `comm` is unchanged and must still be destroyed by the caller. */
COLLX_API collx_status_t collx_comm_shrink(collx_comm_t comm, int64_t timeout_ms, collx_comm_t* newcomm);

/* Release the communicator after its operations finish (pending nonblocking operations
 * are waited for up to the timeout). Local: peers learn that this rank left; their later
 * operations that need it fail with COLLX_ERR_REMOTE. NULL is accepted and ignored.
 * In the process that hosts the TCP store (rank 0 unless collx-run or a store handle
 * provides it) it also waits until every rank has finished reading its bootstrap keys from
 * the store (at most the timeout, capped at 30 s), so a rank 0 that fails or finishes first
 * and exits does not take the store away from a rank still inside collx_comm_create. */
COLLX_API collx_status_t collx_comm_destroy(collx_comm_t comm);

/* Stop everything on the communicator now: every waiting call on any thread returns
 * COLLX_ERR_ABORTED, peers see this rank fail, later calls fail. Never blocks; safe from
 * any thread. The handle must still be released with collx_comm_destroy. */
COLLX_API collx_status_t collx_comm_abort(collx_comm_t comm);

COLLX_API collx_status_t collx_comm_rank(collx_comm_t comm, int32_t* rank);
COLLX_API collx_status_t collx_comm_size(collx_comm_t comm, int32_t* size);
/* Rank among the ranks on this host, and how many ranks this host has. */
COLLX_API collx_status_t collx_comm_local_rank(collx_comm_t comm, int32_t* local_rank);
COLLX_API collx_status_t collx_comm_local_size(collx_comm_t comm, int32_t* local_size);
/* COLLX_OK while healthy; else the fatal status that poisoned the communicator. */
COLLX_API collx_status_t collx_comm_get_async_error(collx_comm_t comm, collx_status_t* error);

/* Write the flight record (the last COLLX_FR_SIZE operations of every communicator of this
 * process: kind, count, datatype, peers, state, timestamps) to `dir`/rank<R>.json, R being the
 * world rank. `dir` NULL or "" = COLLX_FR_DIR (default /tmp/collx-fr-<uid>-<store hash>), made 0700
 * if missing, file 0600. COLLX_ERR_INVALID_USAGE: COLLX_FR_SIZE=0, or `dir` is a symlink, another
 * user's or open to group/others (docs/security.md). `comm`: any live communicator; the caller owns
 * `dir`. Local, never blocks on peers; any thread. Also written on a timeout and on COLLX_FR_SIGNAL;
 * `collx-info hang DIR` reads the files of all ranks (docs/debugging.md). */
COLLX_API collx_status_t collx_comm_dump_flight_record(collx_comm_t comm, const char* dir);
/* The transport the communicator's ranks talk over: "shm", "tcp" or "ucx". The string is
 * static (never freed). Thread-safe. */
COLLX_API collx_status_t collx_comm_transport(collx_comm_t comm, const char** name);

/* Explain the automatic algorithm choice for a call of `coll` with `count` elements of
 * `datatype` on this communicator (count as the collective's own argument: per rank for
 * reduce-scatter and all-gather): the algorithm chosen and why (a COLLX_ALGO rule or the
 * cost model), and for every candidate its predicted time, message count and chunk size,
 * and the model's constants with their source (COLLX_TUNE_FILE or built-in defaults).
 * Nothing is communicated. Writes NUL-terminated text into buf (capacity *len bytes) and
 * sets *len to the bytes needed including the NUL; when buf is NULL or too small the text
 * is not written and COLLX_ERR_INVALID_ARG is returned (call again with *len bytes).
 * Thread-safe. */
COLLX_API collx_status_t collx_explain(collx_comm_t comm, collx_coll_t coll, size_t count,
                                       collx_datatype_t datatype, char* buf, size_t* len);

/* ---------------------------------------------------------------------------------------
 * Per-call options
 * ------------------------------------------------------------------------------------- */

typedef struct collx_opts {
  size_t size;           /* sizeof(collx_opts_t) as compiled by the caller */
  int32_t algorithm;     /* collx_algorithm_t; COLLX_ALGO_AUTO = let the library choose */
  int32_t mem_kind;      /* collx_mem_kind_t of the buffers; COLLX_MEM_AUTO = detect */
  int64_t timeout_ms;    /* deadline of this call; -1 = the communicator's timeout */
  double premul_scalar;  /* the scalar of COLLX_PREMUL_SUM (ignored by other ops) */
  void* stream;          /* cudaStream_t for device buffers; NULL = the default stream.
                            The operation is ordered after the work already queued on it and
                            later work on it sees the result (docs/cuda.md: over NCCL the call
                            returns once the operation is queued) */
} collx_opts_t;

/* Fill *opts with defaults (auto algorithm and memory kind, communicator timeout,
 * premul_scalar 1). */
COLLX_API collx_status_t collx_opts_init(collx_opts_t* opts, size_t size);

/* The algorithm collx would run for this collective, count and datatype on `comm` given
 * `opts` (NULL = defaults): the forced one, the COLLX_ALGO override, or the default choice by
 * size. Local, never communicates. Lets tools print the algorithm next to their results. */
COLLX_API collx_status_t collx_select_algorithm(collx_comm_t comm, collx_coll_t coll, size_t count,
                                                collx_datatype_t datatype, const collx_opts_t* opts,
                                                collx_algorithm_t* algorithm);

/* ---------------------------------------------------------------------------------------
 * Collectives. `opts` may be NULL. Every rank of the communicator must call the same
 * collectives in the same order with the same count, datatype, op and root; otherwise the
 * ranks involved get COLLX_ERR_MISMATCH naming both calls (never a hang or wrong data).
 * A buffer may be NULL only when its count is 0. In-place forms follow NCCL: see each.
 * ------------------------------------------------------------------------------------- */

/* recvbuf[i] = op over ranks of sendbuf[i], for i < count, on every rank.
 * In place: sendbuf == recvbuf. Otherwise the buffers must not overlap. */
COLLX_API collx_status_t collx_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                         collx_datatype_t datatype, collx_op_t op,
                                         collx_comm_t comm, const collx_opts_t* opts);

/* sendbuf holds size * recvcount elements; rank r receives block r of the reduction.
 * In place: recvbuf == sendbuf + rank * recvcount (in elements). */
COLLX_API collx_status_t collx_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                              collx_datatype_t datatype, collx_op_t op,
                                              collx_comm_t comm, const collx_opts_t* opts);

/* recvbuf (size * sendcount elements) gets every rank's sendbuf, in rank order.
 * In place: sendbuf == recvbuf + rank * sendcount (in elements). */
COLLX_API collx_status_t collx_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                         collx_datatype_t datatype, collx_comm_t comm,
                                         const collx_opts_t* opts);

/* recvbuf on every rank gets root's sendbuf (sendbuf is read on the root only).
 * In place: sendbuf == recvbuf on the root. */
COLLX_API collx_status_t collx_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                                         collx_datatype_t datatype, int32_t root,
                                         collx_comm_t comm, const collx_opts_t* opts);

/* The root's recvbuf gets the reduction of every rank's sendbuf (recvbuf is written on
 * the root only and may be NULL elsewhere). In place: sendbuf == recvbuf on the root. */
COLLX_API collx_status_t collx_reduce(const void* sendbuf, void* recvbuf, size_t count,
                                      collx_datatype_t datatype, collx_op_t op, int32_t root,
                                      collx_comm_t comm, const collx_opts_t* opts);

/* Block j (count elements) of sendbuf goes to rank j, which stores it as block `rank` of
 * its recvbuf. Both buffers hold size * count elements. Not in place: no overlap. */
COLLX_API collx_status_t collx_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                                        collx_datatype_t datatype, collx_comm_t comm,
                                        const collx_opts_t* opts);

/* MPI_Gather: the root's recvbuf (size * count elements) gets every rank's sendbuf (count
 * elements) as block `rank`, in rank order. recvbuf is written on the root only and may be
 * NULL elsewhere. In place (root only): sendbuf == recvbuf + root * count (in elements);
 * any other overlap on the root is an error. */
COLLX_API collx_status_t collx_gather(const void* sendbuf, void* recvbuf, size_t count,
                                      collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                      const collx_opts_t* opts);

/* MPI_Scatter: block r (count elements) of the root's sendbuf (size * count elements) goes
 * to rank r's recvbuf (count elements). sendbuf is read on the root only and may be NULL
 * elsewhere. In place (root only): recvbuf == sendbuf + root * count (in elements), where
 * the root's block is left as it is; any other overlap on the root is an error. */
COLLX_API collx_status_t collx_scatter(const void* sendbuf, void* recvbuf, size_t count,
                                       collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                       const collx_opts_t* opts);

/* MPI_Allgatherv: rank r's sendbuf (sendcount elements, equal to recvcounts[r]) lands in
 * every rank's recvbuf at element offset displs[r]. recvcounts and displs have one entry per
 * rank, are read during the call only (the nonblocking form copies them) and must hold the
 * same values on every rank: ranks whose recvcounts differ get COLLX_ERR_MISMATCH. displs ==
 * NULL packs the blocks in rank order (displs[r] = recvcounts[0] + ... + recvcounts[r-1]).
 * The blocks must not overlap one another. In place: sendbuf == recvbuf + displs[rank]
 * (in elements); any other overlap is an error. */
COLLX_API collx_status_t collx_allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                          const size_t* recvcounts, const size_t* displs,
                                          collx_datatype_t datatype, collx_comm_t comm,
                                          const collx_opts_t* opts);

/* v-collectives (docs/collectives-v.md). Counts and displacements are size_t arrays of one
 * entry per rank, in elements, read during the call only (the nonblocking forms copy them).
 * A NULL displacement array packs the blocks in rank order (displs[r] = counts[0] + ... +
 * counts[r-1]). Blocks a rank receives must not overlap one another. CUDA device buffers are
 * staged through pinned host memory (docs/cuda.md); device bytes between a rank's received
 * blocks are left as they were. */

/* MPI_Alltoallv: block j of sendbuf (sendcounts[j] elements at sdispls[j]) goes to rank j,
 * which stores it at rdispls[rank] of its recvbuf (recvcounts[rank] elements). Rank r's
 * sendcounts[j] must equal rank j's recvcounts[r]: a pair that disagrees gets
 * COLLX_ERR_MISMATCH (every pair exchanges one message, empty blocks included, whose size is
 * checked). sendcounts[rank] must equal recvcounts[rank]. No in-place form: sendbuf's blocks
 * must not overlap recvbuf's. sendcounts and recvcounts must not be NULL. */
COLLX_API collx_status_t collx_alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                                         void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                                         collx_datatype_t datatype, collx_comm_t comm,
                                         const collx_opts_t* opts);

/* MPI_Reduce_scatter: sendbuf holds every rank's block packed in rank order (recvcounts[0] +
 * ... + recvcounts[size-1] elements); rank r's recvbuf (recvcounts[r] elements) gets the
 * reduction over ranks of block r. Every op and datatype of collx_reduce_scatter. recvcounts
 * must be the same on every rank (else COLLX_ERR_MISMATCH). In place: recvbuf == sendbuf +
 * recvcounts[0] + ... + recvcounts[rank-1] (in elements); any other overlap is an error. */
COLLX_API collx_status_t collx_reduce_scatterv(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                               collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                               const collx_opts_t* opts);

/* MPI_Gatherv: rank r's sendbuf (sendcount elements) lands in the root's recvbuf at displs[r]
 * (recvcounts[r] elements, which must equal rank r's sendcount: else COLLX_ERR_MISMATCH).
 * recvbuf, recvcounts and displs are read on the root only and may be NULL elsewhere.
 * In place (root only): sendbuf == recvbuf + displs[root] (in elements). */
COLLX_API collx_status_t collx_gatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                       const size_t* recvcounts, const size_t* displs,
                                       collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                       const collx_opts_t* opts);

/* MPI_Scatterv: sendcounts[r] elements at displs[r] of the root's sendbuf go to rank r's
 * recvbuf (recvcount elements, which must equal the root's sendcounts[r]: else
 * COLLX_ERR_MISMATCH). sendbuf, sendcounts and displs are read on the root only and may be
 * NULL elsewhere. In place (root only): recvbuf == sendbuf + displs[root] (in elements). */
COLLX_API collx_status_t collx_scatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                                        void* recvbuf, size_t recvcount, collx_datatype_t datatype,
                                        int32_t root, collx_comm_t comm, const collx_opts_t* opts);

/* Returns when every rank has entered the barrier. */
COLLX_API collx_status_t collx_barrier(collx_comm_t comm, const collx_opts_t* opts);

/* Point to point. Messages from one sender with one tag arrive in the order sent. The
 * receiver's count and datatype must equal the sender's (COLLX_ERR_MISMATCH otherwise).
 * tag >= 0. collx_send returns when the buffer may be reused. */
COLLX_API collx_status_t collx_send(const void* buf, size_t count, collx_datatype_t datatype,
                                    int32_t peer, int32_t tag, collx_comm_t comm,
                                    const collx_opts_t* opts);
COLLX_API collx_status_t collx_recv(void* buf, size_t count, collx_datatype_t datatype,
                                    int32_t peer, int32_t tag, collx_comm_t comm,
                                    const collx_opts_t* opts);

/* ---------------------------------------------------------------------------------------
 * Nonblocking forms. They return at once with *request set; the operation runs on the
 * communicator's progress thread, in call order with the other collectives of the
 * communicator. Buffers must stay valid and untouched until the request completes.
 * ------------------------------------------------------------------------------------- */

COLLX_API collx_status_t collx_iallreduce(const void* sendbuf, void* recvbuf, size_t count,
                                          collx_datatype_t datatype, collx_op_t op,
                                          collx_comm_t comm, const collx_opts_t* opts,
                                          collx_request_t* request);
COLLX_API collx_status_t collx_ireduce_scatter(const void* sendbuf, void* recvbuf,
                                               size_t recvcount, collx_datatype_t datatype,
                                               collx_op_t op, collx_comm_t comm,
                                               const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_iallgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                          collx_datatype_t datatype, collx_comm_t comm,
                                          const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_ibroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                          collx_datatype_t datatype, int32_t root,
                                          collx_comm_t comm, const collx_opts_t* opts,
                                          collx_request_t* request);
COLLX_API collx_status_t collx_ireduce(const void* sendbuf, void* recvbuf, size_t count,
                                       collx_datatype_t datatype, collx_op_t op, int32_t root,
                                       collx_comm_t comm, const collx_opts_t* opts,
                                       collx_request_t* request);
COLLX_API collx_status_t collx_ialltoall(const void* sendbuf, void* recvbuf, size_t count,
                                         collx_datatype_t datatype, collx_comm_t comm,
                                         const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_igather(const void* sendbuf, void* recvbuf, size_t count,
                                       collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                       const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_iscatter(const void* sendbuf, void* recvbuf, size_t count,
                                        collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                        const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_iallgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                           const size_t* recvcounts, const size_t* displs,
                                           collx_datatype_t datatype, collx_comm_t comm,
                                           const collx_opts_t* opts, collx_request_t* request);
/* Nonblocking v-collectives: the count and displacement arrays are copied before the call
 * returns (they may be reused at once); the data buffers are borrowed until completion. */
COLLX_API collx_status_t collx_ialltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                                          void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                                          collx_datatype_t datatype, collx_comm_t comm,
                                          const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_ireduce_scatterv(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                                collx_datatype_t datatype, collx_op_t op, collx_comm_t comm,
                                                const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_igatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                                        const size_t* recvcounts, const size_t* displs,
                                        collx_datatype_t datatype, int32_t root, collx_comm_t comm,
                                        const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_iscatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                                         void* recvbuf, size_t recvcount, collx_datatype_t datatype,
                                         int32_t root, collx_comm_t comm, const collx_opts_t* opts,
                                         collx_request_t* request);
COLLX_API collx_status_t collx_ibarrier(collx_comm_t comm, const collx_opts_t* opts,
                                        collx_request_t* request);
/* Point-to-point. Receives from one peer with one tag match its sends in call order.
 * Device buffers over staging (docs/cuda.md, "What blocks the host"): collx_isend queues the
 * copy of buf to host staging on opts->stream and returns without waiting for the stream; the
 * message is posted once that copy ended, and is complete for collx_wait/collx_test when it
 * left. collx_irecv returns at once; the copy to buf is queued on opts->stream by the
 * collx_wait/collx_test that sees the message. */
COLLX_API collx_status_t collx_isend(const void* buf, size_t count, collx_datatype_t datatype,
                                     int32_t peer, int32_t tag, collx_comm_t comm,
                                     const collx_opts_t* opts, collx_request_t* request);
COLLX_API collx_status_t collx_irecv(void* buf, size_t count, collx_datatype_t datatype,
                                     int32_t peer, int32_t tag, collx_comm_t comm,
                                     const collx_opts_t* opts, collx_request_t* request);

/* *done = 1 and returns the operation's status once it finished; *done = 0 and COLLX_OK
 * while it runs. Never blocks. */
COLLX_API collx_status_t collx_test(collx_request_t request, int* done);
/* Waits up to timeout_ms (< 0: until the operation ends; its own deadline still applies)
 * and returns the operation's status, or COLLX_IN_PROGRESS if it is still running (the
 * request stays valid; wait again or free it). */
COLLX_API collx_status_t collx_wait(collx_request_t request, int64_t timeout_ms);
/* Release the handle. An operation still running goes on to completion; its buffers must
 * stay valid until then (a later blocking collective on the communicator ensures it). */
COLLX_API collx_status_t collx_request_free(collx_request_t request);

/* ---------------------------------------------------------------------------------------
 * Grouped calls (docs/groups.md), like ncclGroupStart/ncclGroupEnd.
 *
 * Between collx_group_start and the matching collx_group_end, the collectives and
 * send/recv calls this thread makes (blocking and collx_i* forms, on any communicators) are
 * checked and recorded, not run: a recorded call returns COLLX_OK at once (or its argument
 * error) and its buffers must stay valid and untouched until collx_group_end returns.
 * collx_group_end runs them all and returns when all completed:
 *  - every send and receive is posted nonblocking before anything waits, so any order of
 *    sends and receives inside the group is deadlock-free;
 *  - collectives run in recorded order per communicator, except that all-reduces of at most
 *    COLLX_GROUP_FUSE_BYTES with the same datatype, op and algorithm are packed into one
 *    message (bit-identical results); every rank must group the same calls in the same order
 *    (else COLLX_ERR_MISMATCH);
 *  - calls of one group must not depend on each other's results (no buffer written by one
 *    and read by another).
 * Groups nest: only the outermost collx_group_end runs the calls. The group belongs to the
 * calling thread; other threads' calls are not recorded.
 * Errors: collx_group_end without a start is COLLX_ERR_INVALID_USAGE. A call refused while
 * recorded makes collx_group_end fail with that status, naming the call, and run nothing.
 * Otherwise collx_group_end returns the first failure, naming the call ("call 3 of 5 in the
 * group ..."); that call's communicator has failed as after a failed collective. The message
 * is in collx_last_error(NULL) on this thread and in collx_last_error(comm) of that
 * communicator. collx_wait on a request recorded in the open group is COLLX_ERR_INVALID_USAGE
 * (collx_test answers "not done"); such requests complete when collx_group_end returns.
 * Each call ends by its own deadline, counted from the start of collx_group_end.
 * ------------------------------------------------------------------------------------- */

COLLX_API collx_status_t collx_group_start(void);
COLLX_API collx_status_t collx_group_end(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Device-memory utilities (allocation, copies, stream waits). */
#include "collx/device.h"

#endif /* COLLX_COLLX_H_ */
