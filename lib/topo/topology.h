// The machine as collx sees it: packages, NUMA nodes, cores, hardware threads (PUs),
// caches, PCI devices with their locality, GPUs and network interfaces. A plain value
// (copyable, no hwloc types), filled from hwloc by topo_load.cc, so the decisions in
// topo_decide.h and the renderings in topo_render.h are pure functions testable anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace collx {
namespace topo {

// Every index below is the position in its vector ("logical index"); os_index is the
// operating system's number (the one taskset/numactl use for PUs and NUMA nodes).
struct Package {
  int os_index = -1;
  std::vector<int> pus;    // PU os indexes
};

struct NumaNode {
  int os_index = -1;
  int package = -1;        // logical package index, -1 if the node spans packages
  uint64_t memory_bytes = 0;
  std::vector<int> pus;
};

struct Core {
  int os_index = -1;
  int package = -1;
  int numa = -1;           // logical NUMA index
  std::vector<int> pus;
};

struct Pu {
  int os_index = -1;
  int core = -1, numa = -1, package = -1;  // logical indexes
};

struct Cache {
  int level = 0;           // 1, 2, 3...
  char type = 'u';         // 'd' data, 'i' instruction, 'u' unified
  uint64_t bytes = 0;
  std::vector<int> pus;
};

// A PCI device, with where it is attached: the NUMA node (logical, -1 when not local to
// exactly one) and package of its closest CPU-side ancestor, and the PUs of that ancestor.
struct PciDevice {
  std::string busid;       // "0000:17:00.0"
  uint16_t vendor = 0, device = 0;
  uint16_t class_id = 0;   // 0x0302 3D controller, 0x0200 Ethernet, 0x0207 InfiniBand...
  int numa = -1, package = -1;
  std::vector<int> pus;
};

struct Gpu {
  std::string name;        // OS device name ("cuda0", "nvidia0") or "gpu<k>"
  std::string model;
  int pci = -1;            // index in pci
};

struct Nic {
  std::string name;        // "eth0", "ib0"
  std::string fabric;      // OpenFabrics device of the same PCI function ("mlx5_0"), or ""
  int64_t speed_mbps = -1; // /sys/class/net/<name>/speed; -1 unknown
  int pci = -1;            // index in pci, -1 for a NIC without PCI locality
};

struct Topology {
  std::string source;      // "this machine", "xml:<path>", "synthetic:<description>"
  std::string hostname;
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;
  std::vector<Pu> pus;
  std::vector<Cache> caches;
  std::vector<PciDevice> pci;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;

  // NUMA / package of a GPU or NIC (through its PCI device); -1 when unknown.
  int gpu_numa(int gpu) const;
  int nic_numa(int nic) const;
  int nic_package(int nic) const;
};

}  // namespace topo
}  // namespace collx
