// The one registry of every COLLX_* setting: its name, type, default and meaning.
// Nothing in collx reads a COLLX_* environment variable except through this file, and
// collx-info / docs print this table, so documentation cannot drift from the code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/common/status.h"

namespace collx {

// kSecret: a string that nothing prints (collx-info shows only whether it is set).
enum class SettingType { kInt, kSize, kString, kBool, kSecret };

// X(ID, TYPE, DEFAULT, MEANING): the variable is COLLX_<ID>.
#define COLLX_SETTINGS(X)                                                                          \
  X(RANK, kInt, "", "Rank of this process (else RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK).")    \
  X(WORLD_SIZE, kInt, "", "Number of ranks (else WORLD_SIZE, SLURM_NTASKS or OMPI_COMM_WORLD_SIZE).") \
  X(LOCAL_RANK, kInt, "", "Rank among the ranks of this host (else LOCAL_RANK; derived if unset).") \
  X(LOCAL_WORLD_SIZE, kInt, "", "Ranks on this host (else LOCAL_WORLD_SIZE; derived if unset).")   \
  X(STORE_ADDR, kString, "", "host:port of the bootstrap TCP store (else MASTER_ADDR and MASTER_PORT+1).") \
  X(TIMEOUT_MS, kInt, "600000", "Default deadline of every blocking call in milliseconds; -1 waits forever.") \
  X(TRANSPORTS, kString, "", "Transports allowed, comma separated (tcp, shm, ucx, nccl); empty = all built.") \
  X(BIND, kString, "none",                                                                         \
    "Bind each rank to CPUs: numa (the NUMA node of its GPU, else of its local rank, ranks in "   \
    "blocks), core (one core per local rank, in blocks) or none. See docs/topology.md.")          \
  X(ALGO, kString, "",                                                                             \
    "Algorithm overrides: 'COLL:ALGO' or 'COLL:MIN-MAX:ALGO' rules separated by ';' "             \
    "(sizes in bytes with K/M/G, 'inf'), e.g. 'allreduce:0-64K:recursive_doubling;allreduce:ring'.") \
  X(TUNE_FILE, kString, "",                                                                        \
    "Cost-model constants measured by 'collx-bench --tune FILE'; empty = built-in defaults.")     \
  X(CHUNK_SIZE, kSize, "512K", "Pipeline chunk of ring and tree algorithms, in bytes.")           \
  X(NCCL_CHECK_CALLS, kBool, "1",                                                                  \
    "1: before each collective on the NCCL route, ranks compare the call (collective, count, "    \
    "type, op, root, sequence number) over the host transport, so mismatched calls fail with "    \
    "COLLX_ERR_MISMATCH instead of hanging on the GPU until the deadline. Costs log2(ranks) "     \
    "empty host messages and makes the host wait until every rank reaches the call (not for "    \
    "the GPUs); 0 turns it off. See docs/cuda.md.")                                               \
  X(SOCKET_IFNAME, kString, "",                                                                    \
    "Network interfaces for TCP: prefixes separated by ',' ('^' excludes, '=' matches exactly); " \
    "empty = the interface that routes to the store.")                                            \
  X(TCP_NSOCKS, kInt, "2", "TCP sockets per peer; messages of TCP_STRIPE_MIN bytes or more are striped across them.") \
  X(TCP_STRIPE_MIN, kSize, "256K", "Smallest message striped across several TCP sockets.")        \
  X(TCP_SOCKBUF, kSize, "4M",                                                                      \
    "Kernel send and receive buffer of each TCP socket (capped by net.core.wmem_max/rmem_max); "  \
    "0 keeps the kernel's autotuning.")                                                            \
  X(TCP_KEEPALIVE_IDLE_S, kInt, "10",                                                              \
    "Seconds a transport or store TCP connection may be silent before the kernel probes the "    \
    "peer (TCP keepalive); 0 leaves keepalive off. With the defaults a silent peer (network "     \
    "partition, host gone) is reported within 25 s.")                                             \
  X(TCP_KEEPALIVE_INTERVAL_S, kInt, "5", "Seconds between unanswered TCP keepalive probes.")      \
  X(TCP_KEEPALIVE_COUNT, kInt, "3",                                                                \
    "Unanswered TCP keepalive probes after which a connection is dropped when "                   \
    "COLLX_TCP_USER_TIMEOUT_MS is 0 (otherwise the user timeout decides).")                       \
  X(TCP_UNACKED_TIMEOUT_MS, kInt, "20000",                                                         \
    "The TCP transport fails a peer as unreachable when data sent to it got no ACK at all for "  \
    "this long (checked about once a second while a call waits); 0 = off. A live peer that "      \
    "stops reading is never failed by it (its kernel acknowledges the zero-window probes). Also " \
    "the TCP_USER_TIMEOUT of store connections when COLLX_TCP_USER_TIMEOUT_MS is 0.")            \
  X(TCP_USER_TIMEOUT_MS, kInt, "0",                                                                \
    "TCP_USER_TIMEOUT of transport and store connections; 0 = not set on transport sockets. "    \
    "Trap: since Linux 5.11 it also drops a connection to a live peer that stops reading for "    \
    "this long (a rank in a long checkpoint), so prefer COLLX_TCP_UNACKED_TIMEOUT_MS.")          \
  X(SHM_NO_CMA, kBool, "0",                                                                        \
    "1: the shared-memory transport never uses cross-memory attach (process_vm_readv); large "    \
    "messages are copied through the rings instead.")                                              \
  X(SHM_HUGE_PAGES, kBool, "1",                                                                    \
    "1: an ordinary buffer that peers on the host read with cross-memory attach, offered again "   \
    "and again (a training step's), gets its 2 MiB-aligned interior backed by transparent huge "   \
    "pages (madvise MADV_COLLAPSE, once): the kernel then pins one page per 2 MiB instead of 512 " \
    "and those reads run 2-3x faster. 0: buffers are left as they are.")                           \
  X(UCX_PEER_ERRORS, kBool, "1",                                                                   \
    "1: every UCX endpoint uses UCX peer error handling (a dead peer fails its operations; UCX "    \
    "1.13 then reaches same-host peers over TCP loopback). 0: same-host peers without it, so UCX " \
    "may use shared memory; their death is still noticed by pid, but their transfers cannot be "   \
    "force-cancelled.")                                                                             \
  X(UNEXPECTED_MAX, kSize, "256M",                                                                 \
    "Bytes of unexpected messages (arrived before their receive was posted) buffered per "        \
    "communicator before collx stops reading from the sender.")                                    \
  X(GROUP_FUSE_BYTES, kSize, "64K",                                                                \
    "Inside collx_group_start/end, all-reduces of at most this many bytes with the same datatype, " \
    "op and algorithm are packed into one message of at most this size; 0 = no fusion. Every "     \
    "rank must use the same value (docs/groups.md).")                                               \
  X(JOB_TOKEN, kSecret, "",                                                                        \
    "Secret shared by the ranks of one job: every store and TCP transport connection proves it "   \
    "knows it (HMAC-SHA256 challenge-response; needs OpenSSL). At least 16 bytes; never printed. "  \
    "Empty = no authentication. See docs/security.md.")                                             \
  X(REQUIRE_TOKEN, kBool, "0",                                                                     \
    "1: creating a TCP store (server or client) or a TCP transport without COLLX_JOB_TOKEN is an " \
    "error instead of an unauthenticated connection. See docs/security.md.")                       \
  X(STORE_MAX_KEYS, kInt, "1000000", "Most keys a TCP store server holds; a write beyond it fails.") \
  X(STORE_MAX_BYTES, kSize, "1G", "Most bytes (keys plus values) a TCP store server holds; a write beyond it fails.") \
  X(FR_SIZE, kInt, "256",                                                                          \
    "Operations each communicator keeps in its flight recorder (0 disables it). See "             \
    "docs/debugging.md.")                                                                          \
  X(FR_DIR, kString, "",                                                                           \
    "Directory of flight-recorder dumps (rank<R>.json), created 0700; it must be this user's, "   \
    "with no group or other access. Empty = /tmp/collx-fr-<uid>-<hash of the store address>.")    \
  X(FR_SIGNAL, kString, "",                                                                        \
    "Signal that makes every communicator of the process dump its flight recorder, e.g. "         \
    "SIGUSR1; empty = none.")                                                                      \
  X(TRACE, kString, "",                                                                            \
    "Write a Chrome-trace/Perfetto JSON timeline of every operation to this file (%r = rank, "    \
    "%p = pid; '.rank<R>.json' is appended without %r).")                                         \
  X(DEBUG, kString, "WARN", "Log level: NONE, WARN, INFO or TRACE.")                              \
  X(DEBUG_SUBSYS, kString, "ALL",                                                                  \
    "Subsystems logged, comma separated: INIT, COLL, P2P, NET, STORE, TUNE, ALL; '^NAME' excludes.") \
  X(DEBUG_FILE, kString, "", "Log to this file instead of stderr; %h becomes the host name, %p the pid.") \
  X(TEST_HOST_ID, kString, "",                                                                     \
    "Tests only: host labels by world rank, comma separated (e.g. 'a,a,b,b'); ranks with different " \
    "labels count as different hosts although they share this one (one label: every rank). Never " \
    "set it in production.")                                                                       \
  X(TEST_DEVICE, kString, "",                                                                      \
    "Tests only: 'emulated' replaces the CUDA device layer with the emulated device (host memory " \
    "that host code cannot touch, streams as worker threads; docs/cuda.md), with or without a "   \
    "GPU or CUDA build; a warning is logged. Empty = the real device layer. Never set it in "     \
    "production.")                                                                                 \
  X(TEST_DEVICE_COUNT, kInt, "1", "Tests only: number of emulated devices (COLLX_TEST_DEVICE=emulated).") \
  X(TEST_DEVICE_DELAY_US, kInt, "0",                                                               \
    "Tests only: each operation queued on an emulated stream first sleeps a random time in "      \
    "[0, this many] microseconds, so a missing synchronization fails instead of passing by luck.") \
  X(TEST_DEVICE_PEER_ACCESS, kInt, "1",                                                            \
    "Tests only: 1 = emulated devices can access one another's memory (cudaDeviceCanAccessPeer), " \
    "0 = no two can, so CUDA IPC between ranks on different devices falls back to staging.")

enum class SettingId {
#define COLLX_SETTING_ID_(id, type, def, meaning) id,
  COLLX_SETTINGS(COLLX_SETTING_ID_)
#undef COLLX_SETTING_ID_
      kCount
};

struct SettingInfo {
  SettingId id;
  const char* name;           // "COLLX_TIMEOUT_MS"
  SettingType type;
  const char* default_value;  // "" = no default (unset)
  const char* meaning;
};

const SettingInfo& setting_info(SettingId id);
// "integer", "size", "boolean", "string" or "secret string": the type column of the docs.
const char* setting_type_name(SettingType type);
const SettingInfo* all_settings(size_t* count);

// The raw value: the environment's when set (even empty), else the default.
std::string setting_raw(SettingId id);
// True when the environment sets the variable.
bool setting_is_set(SettingId id);

// Typed reads. A malformed value is COLLX_ERR_INVALID_ARG naming the variable and value.
// An unset value without a default leaves *out untouched and returns OK with *found = false
// when `found` is given.
Status setting_int(SettingId id, int64_t* out, bool* found = nullptr);
Status setting_size(SettingId id, uint64_t* out, bool* found = nullptr);
Status setting_bool(SettingId id, bool* out, bool* found = nullptr);

// "64K" -> 65536, "1M", "2G", "123", "inf" (-> UINT64_MAX when allow_inf). Returns false on
// malformed input.
bool parse_size(const std::string& text, uint64_t* out, bool allow_inf = false);

}  // namespace collx

namespace collx {
// The registry as a Markdown table (docs/environment.md is this text; a test keeps them equal).
std::string settings_markdown();
}  // namespace collx
