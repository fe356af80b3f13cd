// Which network interface a rank's TCP transport uses when COLLX_SOCKET_IFNAME is not set
// and the job spans hosts: the interface nearest the rank (lib/topo nic_for_rank) among
// those that reach the same peers as the route to the store. "Reach the same peers" is
// judged by IP subnet: interfaces on the route interface's subnet, so a rank never picks a
// management or storage NIC that cannot reach the others.
#pragma once

#include <string>
#include <vector>

#include "lib/topo/topology.h"

namespace collx {

// Names of the interfaces that are up with an IPv4 address on the same subnet as the local
// address `route_ip` (that address's own interface included). Empty on any error.
std::vector<std::string> interfaces_on_subnet_of(const std::string& route_ip);

// The NIC of `machine` nearest local rank `local_rank` of `local_size`, among `reachable`
// (by name); "" when none of them is known to the topology.
std::string nearest_reachable_nic(const topo::Topology& machine, const std::vector<std::string>& reachable,
                                  int local_rank, int local_size);

}  // namespace collx
