/* collx topology: the machine as hwloc describes it (packages, NUMA nodes, cores, hardware
 * threads, caches, PCI devices, GPUs, network interfaces), and the placement decisions
 * collx takes from it (binding, nearest NIC, ring order).
 *
 * Conventions are those of collx/collx.h; in particular:
 *  - A collx_topo_t is created by exactly one collx_topo_load* call and released by
 *    collx_topo_destroy; it is immutable in between, so any number of threads may query one
 *    handle concurrently. Loading and freeing are not concurrent with queries of the same
 *    handle.
 *  - After an error, collx_last_error(NULL) (on the calling thread) names what was wrong.
 *  - In a build without hwloc every load returns COLLX_ERR_UNSUPPORTED; the functions that
 *    take no topology (collx_topo_ring_order) still work.
 *  - Indexes are "logical": positions 0..count-1 in the order hwloc lists the objects.
 *    PU numbers in CPU lists are operating-system numbers (as taskset and numactl use).
 */
#ifndef COLLX_TOPOLOGY_H_
#define COLLX_TOPOLOGY_H_

#include <stddef.h>
#include <stdint.h>

#include "collx/collx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded topology (opaque). */
typedef struct collx_topo_s* collx_topo_t;

/* Kinds of objects. */
typedef enum collx_topo_kind {
  COLLX_TOPO_PACKAGE = 0,
  COLLX_TOPO_NUMA = 1,
  COLLX_TOPO_CORE = 2,
  COLLX_TOPO_PU = 3,
  COLLX_TOPO_CACHE = 4,
  COLLX_TOPO_PCI = 5,
  COLLX_TOPO_GPU = 6,
  COLLX_TOPO_NIC = 7,
  COLLX_TOPO_NUM_KINDS = 8
} collx_topo_kind_t;

/* How collx_topo_bind_cpus places a rank (the values of COLLX_BIND). */
typedef enum collx_bind {
  COLLX_BIND_NONE = 0, /* no binding: an empty CPU list */
  COLLX_BIND_NUMA = 1, /* every PU of the rank's NUMA node (its GPU's, else by local rank) */
  COLLX_BIND_CORE = 2, /* every PU of one core per local rank */
  COLLX_BIND_FROM_ENV = -1 /* read COLLX_BIND (numa | core | none; default none) */
} collx_bind_t;

/* Loads this machine's topology (with PCI devices, GPUs and network interfaces). On
 * success *topo is a new handle owned by the caller (release with collx_topo_destroy). */
COLLX_API collx_status_t collx_topo_load(collx_topo_t* topo);
/* Loads an hwloc XML topology: `path_or_xml` is a file name, or the XML text itself when it
 * starts with '<'. The string is only read during the call. */
COLLX_API collx_status_t collx_topo_load_xml(const char* path_or_xml, collx_topo_t* topo);
/* Loads an hwloc synthetic topology such as "pack:2 numa:2 core:4 pu:2" (no I/O devices). */
COLLX_API collx_status_t collx_topo_load_synthetic(const char* description, collx_topo_t* topo);
/* Releases a handle; NULL is accepted and does nothing. */
COLLX_API collx_status_t collx_topo_destroy(collx_topo_t topo);

/* Number of objects of `kind`. */
COLLX_API collx_status_t collx_topo_count(collx_topo_t topo, collx_topo_kind_t kind, int32_t* count);

/* One object. Fields that do not apply to a kind are -1 (integers) or "" (strings).
 * Initialize with collx_topo_object_init before collx_topo_get, like every size-prefixed
 * struct of collx. */
typedef struct collx_topo_object {
  size_t size;
  int32_t kind;         /* collx_topo_kind_t */
  int32_t index;        /* logical index within its kind */
  int32_t os_index;     /* package, NUMA, core, PU: the OS number */
  int32_t numa;         /* logical NUMA node it belongs to or is nearest (-1: none single) */
  int32_t package;      /* logical package */
  int32_t core;         /* PU: logical core */
  int32_t cache_level;  /* cache: 1, 2, 3... */
  char cache_type;      /* cache: 'd' data, 'i' instruction, 'u' unified */
  uint64_t bytes;       /* NUMA: local memory; cache: size */
  int64_t speed_mbps;   /* NIC: link speed in Mb/s, -1 unknown */
  uint32_t pci_class;   /* PCI: class (0x0302 3D controller, 0x0200 Ethernet...) */
  uint32_t pci_vendor;  /* PCI: vendor id */
  uint32_t pci_device;  /* PCI: device id */
  char name[64];        /* GPU, NIC: OS device name ("cuda0", "eth0"); NIC: or the fabric */
  char pci_busid[32];   /* PCI, GPU, NIC: "0000:17:00.0" */
} collx_topo_object_t;

COLLX_API collx_status_t collx_topo_object_init(collx_topo_object_t* object, size_t size);
COLLX_API collx_status_t collx_topo_get(collx_topo_t topo, collx_topo_kind_t kind, int32_t index,
                                        collx_topo_object_t* object);

/* The PUs (OS numbers, ascending) of an object: its own for packages, NUMA nodes, cores,
 * PUs and caches; those it is local to for PCI devices, GPUs and NICs. Writes at most
 * `capacity` of them to `cpus` (may be NULL when capacity is 0) and the total to *count. */
COLLX_API collx_status_t collx_topo_cpus(collx_topo_t topo, collx_topo_kind_t kind, int32_t index, int32_t* cpus,
                                         int32_t capacity, int32_t* count);

/* The topology as JSON, NUL-terminated. *len is the capacity of `buf` on entry and the
 * bytes needed (with the NUL) on return. With buf NULL only *len is set (COLLX_OK); with a
 * buffer too small nothing is written and COLLX_ERR_INVALID_ARG says how much is needed. */
COLLX_API collx_status_t collx_topo_to_json(collx_topo_t topo, char* buf, size_t* len);

/* ---- Decisions (pure functions of the topology; no binding is applied) ---- */

/* Logical NUMA node nearest a PCI device, GPU or NIC (kind COLLX_TOPO_PCI/GPU/NIC), or -1
 * when the device is not local to a single node. */
COLLX_API collx_status_t collx_topo_nearest_numa(collx_topo_t topo, collx_topo_kind_t kind, int32_t index,
                                                 int32_t* numa);

/* The NIC (index, -1 if the machine has none) for local rank `local_rank` of `local_size`
 * using GPU `gpu` (-1 for none): nearest its NUMA node (same node, then same package),
 * fastest among those, equal ones shared out by local rank. */
COLLX_API collx_status_t collx_topo_nic_for_rank(collx_topo_t topo, int32_t local_rank, int32_t local_size, int32_t gpu,
                                                 int32_t* nic);

/* The PUs to bind a rank to for `mode` (see collx_bind_t), written like collx_topo_cpus.
 * An empty list means "do not bind". */
COLLX_API collx_status_t collx_topo_bind_cpus(collx_topo_t topo, collx_bind_t mode, int32_t local_rank,
                                              int32_t local_size, int32_t gpu, int32_t* cpus, int32_t capacity,
                                              int32_t* count);

/* A ring over `nranks` ranks where hosts[r] names rank r's host: ranks grouped by host
 * (hosts in order of their lowest rank), ascending within a host, so the ring crosses each
 * host boundary once. order[i] receives the rank at position i (caller-owned, nranks entries). */
COLLX_API collx_status_t collx_topo_ring_order(const char* const* hosts, int32_t nranks, int32_t* order);

#ifdef __cplusplus
}
#endif

#endif /* COLLX_TOPOLOGY_H_ */
