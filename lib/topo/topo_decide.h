// Decisions the runtime takes from the topology, as pure functions of a Topology value (so
// tests check them on synthetic and XML machines): the NUMA node of a local rank or of a
// device, the CPUs to bind a rank to (COLLX_BIND), the network interface nearest a rank,
// and a ring order that crosses each host boundary once.
#pragma once

#include <string>
#include <vector>

#include "lib/common/status.h"
#include "lib/topo/topology.h"

namespace collx {
namespace topo {

enum class BindMode { kNone, kNuma, kCore };

// "none", "numa", "core" (any case); "" is none. Else COLLX_ERR_INVALID_ARG naming the value.
Status parse_bind_mode(const std::string& text, BindMode* out);
const char* bind_mode_name(BindMode mode);

// Local ranks are spread over NUMA nodes in blocks (ranks 0..k-1 on node 0, ...), so
// neighbours in rank order share a node. Logical NUMA index; -1 when the machine has none.
int numa_for_local_rank(const Topology& topo, int local_rank, int local_size);

// Logical NUMA index of the PCI device `busid` ("0000:17:00.0", or "17:00.0" in domain 0);
// -1 when unknown or not local to a single node.
int nearest_numa_of_pci(const Topology& topo, const std::string& busid);

// The NUMA node a rank works on: its GPU's (gpu >= 0 and known), else numa_for_local_rank.
int home_numa(const Topology& topo, int local_rank, int local_size, int gpu);

// PU os indexes to bind local rank `local_rank` of `local_size` to: none -> empty (do not
// bind); numa -> every PU of home_numa; core -> every PU of one core, cores handed out in
// blocks in logical order (so a rank's core lies in its NUMA node).
Status bind_cpus(const Topology& topo, BindMode mode, int local_rank, int local_size, int gpu,
                 std::vector<int>* pus);

// The network interface for a rank: the closest to home_numa (same NUMA node, then same
// package, then any), the fastest among those, equal ones shared out by local rank.
// Index into topo.nics, or -1 when there is none. Bad arguments: -1 and *status set.
int nic_for_rank(const Topology& topo, int local_rank, int local_size, int gpu, Status* status = nullptr);

// A ring order over ranks whose host names are `host_of_rank`: ranks grouped by host
// (hosts in order of their first rank), ascending within a host. Element i is the rank at
// ring position i.
std::vector<int> ring_order_by_host(const std::vector<std::string>& host_of_rank);

}  // namespace topo
}  // namespace collx
