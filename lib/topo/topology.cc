// Small accessors of the topology value.
#include "lib/topo/topology.h"

namespace collx {
namespace topo {

namespace {
const PciDevice* pci_of(const Topology& t, int pci) {
  return pci >= 0 && pci < static_cast<int>(t.pci.size()) ? &t.pci[pci] : nullptr;
}
}  // namespace

int Topology::gpu_numa(int gpu) const {
  if (gpu < 0 || gpu >= static_cast<int>(gpus.size())) return -1;
  const PciDevice* d = pci_of(*this, gpus[gpu].pci);
  return d ? d->numa : -1;
}

int Topology::nic_numa(int nic) const {
  if (nic < 0 || nic >= static_cast<int>(nics.size())) return -1;
  const PciDevice* d = pci_of(*this, nics[nic].pci);
  return d ? d->numa : -1;
}

int Topology::nic_package(int nic) const {
  if (nic < 0 || nic >= static_cast<int>(nics.size())) return -1;
  const PciDevice* d = pci_of(*this, nics[nic].pci);
  return d ? d->package : -1;
}

}  // namespace topo
}  // namespace collx
