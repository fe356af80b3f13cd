// Topology from hwloc (see topo_load.h): load with I/O devices kept, then copy into the
// plain Topology value so nothing else in collx sees hwloc.
#include "lib/topo/topo_load.h"

#ifdef COLLX_HAVE_HWLOC
#include <hwloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#endif

namespace collx {
namespace topo {

#ifndef COLLX_HAVE_HWLOC

bool hwloc_built() { return false; }

namespace {
Status unsupported() {
  return make_status(COLLX_ERR_UNSUPPORTED, "topology: collx was built without hwloc (install libhwloc-dev and "
                                            "re-run cmake)");
}
}  // namespace

Status load_this_machine(Topology*) { return unsupported(); }
Status load_xml(const std::string&, Topology*) { return unsupported(); }
Status load_synthetic(const std::string&, Topology*) { return unsupported(); }

#else

bool hwloc_built() { return true; }

namespace {

std::vector<int> pus_of(hwloc_const_cpuset_t set) {
  std::vector<int> pus;
  if (set == nullptr) return pus;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) pus.push_back(i);
  return pus;
}

int logical_ancestor(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_obj_t obj) {
  hwloc_obj_t a = hwloc_get_ancestor_obj_by_type(t, type, obj);
  return a ? static_cast<int>(a->logical_index) : -1;
}

// Logical index of the only NUMA node in `nodeset`, -1 if none or several.
int single_numa(hwloc_topology_t t, hwloc_const_nodeset_t nodeset) {
  if (nodeset == nullptr || hwloc_bitmap_weight(nodeset) != 1) return -1;
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(hwloc_bitmap_first(nodeset)));
  return node ? static_cast<int>(node->logical_index) : -1;
}

const char* info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v ? v : "";
}

int64_t sysfs_speed(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long long mbps = -1;
  if (!(f >> mbps) || mbps <= 0) return -1;  // virtual and down links report -1 or fail
  return mbps;
}

void copy_cpus(hwloc_topology_t t, Topology* out) {
  const int npkg = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < npkg; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i);
    out->packages.push_back(Package{static_cast<int>(o->os_index), pus_of(o->cpuset)});
  }
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    NumaNode n;
    n.os_index = static_cast<int>(o->os_index);
    n.package = logical_ancestor(t, HWLOC_OBJ_PACKAGE, o);
    n.memory_bytes = o->attr ? o->attr->numanode.local_memory : 0;
    n.pus = pus_of(o->cpuset);
    out->numa_nodes.push_back(std::move(n));
  }
  const int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
    Core c;
    c.os_index = static_cast<int>(o->os_index);
    c.package = logical_ancestor(t, HWLOC_OBJ_PACKAGE, o);
    c.numa = single_numa(t, o->nodeset);
    c.pus = pus_of(o->cpuset);
    out->cores.push_back(std::move(c));
  }
  const int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (int i = 0; i < npu; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
    Pu p;
    p.os_index = static_cast<int>(o->os_index);
    p.core = logical_ancestor(t, HWLOC_OBJ_CORE, o);
    p.package = logical_ancestor(t, HWLOC_OBJ_PACKAGE, o);
    p.numa = single_numa(t, o->nodeset);
    out->pus.push_back(p);
  }
  for (int type = HWLOC_OBJ_L1CACHE; type <= HWLOC_OBJ_L3ICACHE; ++type) {
    const auto ty = static_cast<hwloc_obj_type_t>(type);
    if (!hwloc_obj_type_is_cache(ty)) continue;
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t, ty, nullptr); o; o = hwloc_get_next_obj_by_type(t, ty, o)) {
      Cache c;
      c.level = static_cast<int>(o->attr->cache.depth);
      c.type = o->attr->cache.type == HWLOC_OBJ_CACHE_DATA          ? 'd'
               : o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION ? 'i'
                                                                     : 'u';
      c.bytes = o->attr->cache.size;
      c.pus = pus_of(o->cpuset);
      out->caches.push_back(std::move(c));
    }
  }
}

bool is_gpu_class(uint16_t class_id, uint16_t vendor) {
  return class_id == 0x0302 || (class_id == 0x0300 && (vendor == 0x10de || vendor == 0x1002));
}

void copy_io(hwloc_topology_t t, bool this_machine, Topology* out) {
  std::map<hwloc_obj_t, int> pci_index;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, nullptr); o; o = hwloc_get_next_pcidev(t, o)) {
    const auto& a = o->attr->pcidev;
    PciDevice d;
    char busid[32];
    std::snprintf(busid, sizeof busid, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
    d.busid = busid;
    d.vendor = a.vendor_id;
    d.device = a.device_id;
    d.class_id = a.class_id;
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(t, o);
    if (local) {
      d.numa = single_numa(t, local->nodeset);
      d.package = local->type == HWLOC_OBJ_PACKAGE ? static_cast<int>(local->logical_index)
                                                   : logical_ancestor(t, HWLOC_OBJ_PACKAGE, local);
      d.pus = pus_of(local->cpuset);
    }
    pci_index[o] = static_cast<int>(out->pci.size());
    out->pci.push_back(std::move(d));
  }
  auto pci_of = [&](hwloc_obj_t osdev) {
    auto it = pci_index.find(osdev->parent);
    return it == pci_index.end() ? -1 : it->second;
  };
  std::map<int, int> gpu_of_pci, nic_of_pci;
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o; o = hwloc_get_next_osdev(t, o)) {
    const int pci = pci_of(o);
    const auto type = o->attr->osdev.type;
    if (type == HWLOC_OBJ_OSDEV_NETWORK) {
      Nic n;
      n.name = o->name ? o->name : "";
      n.pci = pci;
      const char* speed = info(o, "LinkSpeedMbps");
      n.speed_mbps = *speed ? std::atoll(speed) : (this_machine ? sysfs_speed(n.name) : -1);
      if (pci >= 0) nic_of_pci[pci] = static_cast<int>(out->nics.size());
      out->nics.push_back(std::move(n));
    } else if ((type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) && pci >= 0) {
      auto it = gpu_of_pci.find(pci);
      // One GPU per PCI function, named by its compute device (cuda0) when it has one.
      if (it == gpu_of_pci.end()) {
        gpu_of_pci[pci] = static_cast<int>(out->gpus.size());
        out->gpus.push_back(Gpu{o->name ? o->name : "", info(o, "GPUModel"), pci});
      } else if (type == HWLOC_OBJ_OSDEV_COPROC) {
        out->gpus[it->second].name = o->name ? o->name : "";
      }
    }
  }
  // OpenFabrics devices: named on their NIC, or a NIC of their own (InfiniBand without IPoIB).
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o; o = hwloc_get_next_osdev(t, o)) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    const int pci = pci_of(o);
    auto it = nic_of_pci.find(pci);
    if (pci >= 0 && it != nic_of_pci.end()) {
      out->nics[it->second].fabric = o->name ? o->name : "";
    } else {
      out->nics.push_back(Nic{o->name ? o->name : "", o->name ? o->name : "", -1, pci});
    }
  }
  // PCI GPUs that no OS device announced (hwloc without its CUDA/NVML plugins).
  for (int i = 0; i < static_cast<int>(out->pci.size()); ++i) {
    if (gpu_of_pci.count(i) || !is_gpu_class(out->pci[i].class_id, out->pci[i].vendor)) continue;
    out->gpus.push_back(Gpu{"gpu" + std::to_string(out->gpus.size()), "", i});
  }
}

Status load_with(const std::string& source, bool this_machine, const std::function<int(hwloc_topology_t)>& configure,
                 Topology* out) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return system_error("topology: hwloc_topology_init", errno);
  struct Destroy {
    hwloc_topology_t t;
    ~Destroy() { hwloc_topology_destroy(t); }
  } destroy{t};
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);  // hwloc drops them by default
  if (configure && configure(t) != 0) {
    return make_status(COLLX_ERR_INVALID_ARG, "topology: hwloc rejected %s: %s", source.c_str(),
                       errno ? std::strerror(errno) : "invalid description");
  }
  errno = 0;
  if (hwloc_topology_load(t) != 0) {
    return make_status(this_machine ? COLLX_ERR_SYSTEM : COLLX_ERR_INVALID_ARG, "topology: hwloc could not load %s: %s",
                       source.c_str(), errno ? std::strerror(errno) : "invalid input");
  }
  Topology topo;
  topo.source = source;
  topo.hostname = info(hwloc_get_root_obj(t), "HostName");
  if (topo.hostname.empty() && this_machine) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    topo.hostname = host;
  }
  copy_cpus(t, &topo);
  copy_io(t, this_machine, &topo);
  *out = std::move(topo);
  return Status::Ok();
}

}  // namespace

Status load_this_machine(Topology* out) { return load_with("this machine", true, nullptr, out); }

Status load_xml(const std::string& path_or_xml, Topology* out) {
  if (!path_or_xml.empty() && path_or_xml[0] == '<') {
    return load_with("xml text", false, [&](hwloc_topology_t t) {
      return hwloc_topology_set_xmlbuffer(t, path_or_xml.data(), static_cast<int>(path_or_xml.size()) + 1);
    }, out);
  }
  if (::access(path_or_xml.c_str(), R_OK) != 0) {
    return make_status(COLLX_ERR_INVALID_ARG, "topology: cannot read XML file '%s': %s", path_or_xml.c_str(),
                       std::strerror(errno));
  }
  return load_with("xml:" + path_or_xml, false,
                   [&](hwloc_topology_t t) { return hwloc_topology_set_xml(t, path_or_xml.c_str()); }, out);
}

Status load_synthetic(const std::string& description, Topology* out) {
  return load_with("synthetic:" + description, false,
                   [&](hwloc_topology_t t) { return hwloc_topology_set_synthetic(t, description.c_str()); }, out);
}

#endif  // COLLX_HAVE_HWLOC

}  // namespace topo
}  // namespace collx
