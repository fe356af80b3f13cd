// Filling a Topology from hwloc: this machine, an hwloc XML file or text, or an hwloc
// synthetic description (tests). Without hwloc in the build every loader returns
// COLLX_ERR_UNSUPPORTED "built without hwloc".
#pragma once

#include <string>

#include "lib/common/status.h"
#include "lib/topo/topology.h"

namespace collx {
namespace topo {

bool hwloc_built();

// This machine, with PCI devices, GPUs and network interfaces (speed from /sys/class/net).
Status load_this_machine(Topology* out);
// `path_or_xml`: a file name, or the XML text itself when it starts with '<'. An OS device
// may carry <info name="LinkSpeedMbps" value="..."/> to give a NIC its speed (test data).
Status load_xml(const std::string& path_or_xml, Topology* out);
// hwloc synthetic description, e.g. "pack:2 numa:2 core:4 pu:2" (no I/O devices).
Status load_synthetic(const std::string& description, Topology* out);

}  // namespace topo
}  // namespace collx
