// The C ABI of include/collx/topology.h over lib/topo, beside the other C entry points. Errors
// go through the same guard as every collx_* entry point (lib/api/handles.h): exceptions
// caught, the message kept for collx_last_error(NULL).
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collx/topology.h"
#include "lib/api/handles.h"
#include "lib/common/settings.h"
#include "lib/topo/topo_decide.h"
#include "lib/topo/topo_load.h"
#include "lib/topo/topo_render.h"

struct collx_topo_s {
  collx::topo::Topology topo;
};

using namespace collx;

namespace {

Status load_into(collx_topo_t* out, const std::function<Status(topo::Topology*)>& load) {
  if (!out) return api::null_handle("topo");
  auto handle = std::make_unique<collx_topo_s>();
  COLLX_RETURN_IF_ERROR(load(&handle->topo));
  *out = handle.release();
  return Status::Ok();
}

int kind_count(const topo::Topology& t, int kind) {
  switch (kind) {
    case COLLX_TOPO_PACKAGE: return static_cast<int>(t.packages.size());
    case COLLX_TOPO_NUMA: return static_cast<int>(t.numa_nodes.size());
    case COLLX_TOPO_CORE: return static_cast<int>(t.cores.size());
    case COLLX_TOPO_PU: return static_cast<int>(t.pus.size());
    case COLLX_TOPO_CACHE: return static_cast<int>(t.caches.size());
    case COLLX_TOPO_PCI: return static_cast<int>(t.pci.size());
    case COLLX_TOPO_GPU: return static_cast<int>(t.gpus.size());
    case COLLX_TOPO_NIC: return static_cast<int>(t.nics.size());
    default: return -1;
  }
}

Status check_object(collx_topo_t topo, int kind, int index) {
  if (!topo) return api::null_handle("topo");
  const int n = kind_count(topo->topo, kind);
  if (n < 0) return make_status(COLLX_ERR_INVALID_ARG, "unknown topology object kind %d", kind);
  if (index < 0 || index >= n) {
    return make_status(COLLX_ERR_INVALID_ARG, "index %d out of range: the topology has %d objects of kind %d", index,
                       n, kind);
  }
  return Status::Ok();
}

Status write_cpus(const std::vector<int>& pus, int* cpus, int capacity, int* count) {
  if (!count) return api::null_handle("count");
  if (capacity < 0 || (capacity > 0 && !cpus)) {
    return make_status(COLLX_ERR_INVALID_ARG, "cpus is NULL or capacity %d is negative", capacity);
  }
  for (int i = 0; i < capacity && i < static_cast<int>(pus.size()); ++i) cpus[i] = pus[i];
  *count = static_cast<int>(pus.size());
  return Status::Ok();
}

void copy_name(char* dst, size_t cap, const std::string& src) {
  std::strncpy(dst, src.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

void fill_object(const topo::Topology& t, int kind, int i, collx_topo_object_t* o) {
  o->kind = kind;
  o->index = i;
  const topo::PciDevice* pci = nullptr;
  switch (kind) {
    case COLLX_TOPO_PACKAGE:
      o->os_index = t.packages[i].os_index;
      o->package = i;
      break;
    case COLLX_TOPO_NUMA:
      o->os_index = t.numa_nodes[i].os_index;
      o->numa = i;
      o->package = t.numa_nodes[i].package;
      o->bytes = t.numa_nodes[i].memory_bytes;
      break;
    case COLLX_TOPO_CORE:
      o->os_index = t.cores[i].os_index;
      o->numa = t.cores[i].numa;
      o->package = t.cores[i].package;
      o->core = i;
      break;
    case COLLX_TOPO_PU:
      o->os_index = t.pus[i].os_index;
      o->numa = t.pus[i].numa;
      o->package = t.pus[i].package;
      o->core = t.pus[i].core;
      break;
    case COLLX_TOPO_CACHE:
      o->cache_level = t.caches[i].level;
      o->cache_type = t.caches[i].type;
      o->bytes = t.caches[i].bytes;
      break;
    case COLLX_TOPO_PCI:
      pci = &t.pci[i];
      break;
    case COLLX_TOPO_GPU:
      copy_name(o->name, sizeof o->name, t.gpus[i].name);
      if (t.gpus[i].pci >= 0) pci = &t.pci[t.gpus[i].pci];
      break;
    case COLLX_TOPO_NIC:
      copy_name(o->name, sizeof o->name, t.nics[i].name);
      o->speed_mbps = t.nics[i].speed_mbps;
      if (t.nics[i].pci >= 0) pci = &t.pci[t.nics[i].pci];
      break;
  }
  if (pci) {
    o->numa = pci->numa;
    o->package = pci->package;
    o->pci_class = pci->class_id;
    o->pci_vendor = pci->vendor;
    o->pci_device = pci->device;
    copy_name(o->pci_busid, sizeof o->pci_busid, pci->busid);
  }
}

const std::vector<int>& object_pus(const topo::Topology& t, int kind, int i) {
  static const std::vector<int> kNone;
  auto of_pci = [&](int pci) -> const std::vector<int>& { return pci >= 0 ? t.pci[pci].pus : kNone; };
  switch (kind) {
    case COLLX_TOPO_PACKAGE: return t.packages[i].pus;
    case COLLX_TOPO_NUMA: return t.numa_nodes[i].pus;
    case COLLX_TOPO_CORE: return t.cores[i].pus;
    case COLLX_TOPO_CACHE: return t.caches[i].pus;
    case COLLX_TOPO_PCI: return t.pci[i].pus;
    case COLLX_TOPO_GPU: return of_pci(t.gpus[i].pci);
    case COLLX_TOPO_NIC: return of_pci(t.nics[i].pci);
    default: return kNone;
  }
}

}  // namespace

extern "C" {

collx_status_t collx_topo_load(collx_topo_t* topo) {
  return api::guarded(nullptr, [&] { return load_into(topo, topo::load_this_machine); });
}

collx_status_t collx_topo_load_xml(const char* path_or_xml, collx_topo_t* topo) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!path_or_xml) return api::null_handle("path_or_xml");
    return load_into(topo, [&](topo::Topology* t) { return topo::load_xml(path_or_xml, t); });
  });
}

collx_status_t collx_topo_load_synthetic(const char* description, collx_topo_t* topo) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!description) return api::null_handle("description");
    return load_into(topo, [&](topo::Topology* t) { return topo::load_synthetic(description, t); });
  });
}

collx_status_t collx_topo_destroy(collx_topo_t topo) {
  delete topo;
  return COLLX_OK;
}

collx_status_t collx_topo_count(collx_topo_t topo, collx_topo_kind_t kind, int32_t* count) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!topo || !count) return api::null_handle(!topo ? "topo" : "count");
    const int n = kind_count(topo->topo, kind);
    if (n < 0) return make_status(COLLX_ERR_INVALID_ARG, "unknown topology object kind %d", static_cast<int>(kind));
    *count = n;
    return Status::Ok();
  });
}

collx_status_t collx_topo_object_init(collx_topo_object_t* object, size_t size) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!object) return api::null_handle("object");
    if (size < offsetof(collx_topo_object_t, kind) + sizeof(int32_t)) {
      return make_status(COLLX_ERR_INVALID_ARG, "size %zu is too small for collx_topo_object_t", size);
    }
    collx_topo_object_t full;
    std::memset(&full, 0, sizeof full);
    full.kind = full.index = full.os_index = full.numa = full.package = full.core = full.cache_level = -1;
    full.speed_mbps = -1;
    std::memset(object, 0, size);
    std::memcpy(object, &full, size < sizeof full ? size : sizeof full);
    object->size = size;
    return Status::Ok();
  });
}

collx_status_t collx_topo_get(collx_topo_t topo, collx_topo_kind_t kind, int32_t index, collx_topo_object_t* object) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_object(topo, kind, index));
    if (!object) return api::null_handle("object");
    if (object->size < offsetof(collx_topo_object_t, kind) + sizeof(int32_t)) {
      return make_status(COLLX_ERR_INVALID_ARG, "object->size is %zu; initialize it with collx_topo_object_init first",
                         object->size);
    }
    const size_t size = object->size;
    collx_topo_object_t full;
    collx_topo_object_init(&full, sizeof full);
    fill_object(topo->topo, kind, index, &full);
    std::memcpy(object, &full, size < sizeof full ? size : sizeof full);
    object->size = size;
    return Status::Ok();
  });
}

collx_status_t collx_topo_cpus(collx_topo_t topo, collx_topo_kind_t kind, int32_t index, int32_t* cpus,
                               int32_t capacity, int32_t* count) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_object(topo, kind, index));
    if (kind == COLLX_TOPO_PU) return write_cpus({topo->topo.pus[index].os_index}, cpus, capacity, count);
    return write_cpus(object_pus(topo->topo, kind, index), cpus, capacity, count);
  });
}

collx_status_t collx_topo_to_json(collx_topo_t topo, char* buf, size_t* len) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!topo || !len) return api::null_handle(!topo ? "topo" : "len");
    const std::string json = topo::to_json(topo->topo);
    const size_t capacity = *len;
    *len = json.size() + 1;
    if (!buf) return Status::Ok();
    if (capacity < json.size() + 1) {
      return make_status(COLLX_ERR_INVALID_ARG, "buffer of %zu bytes is too small for the topology JSON (%zu needed)",
                         capacity, json.size() + 1);
    }
    std::memcpy(buf, json.c_str(), json.size() + 1);
    return Status::Ok();
  });
}

collx_status_t collx_topo_nearest_numa(collx_topo_t topo, collx_topo_kind_t kind, int32_t index, int32_t* numa) {
  return api::guarded(nullptr, [&]() -> Status {
    COLLX_RETURN_IF_ERROR(check_object(topo, kind, index));
    if (!numa) return api::null_handle("numa");
    const topo::Topology& t = topo->topo;
    switch (kind) {
      case COLLX_TOPO_PCI: *numa = t.pci[index].numa; break;
      case COLLX_TOPO_GPU: *numa = t.gpu_numa(index); break;
      case COLLX_TOPO_NIC: *numa = t.nic_numa(index); break;
      default:
        return make_status(COLLX_ERR_INVALID_ARG, "collx_topo_nearest_numa takes a PCI device, GPU or NIC (kind %d)",
                           static_cast<int>(kind));
    }
    return Status::Ok();
  });
}

collx_status_t collx_topo_nic_for_rank(collx_topo_t topo, int32_t local_rank, int32_t local_size, int32_t gpu,
                                       int32_t* nic) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!topo || !nic) return api::null_handle(!topo ? "topo" : "nic");
    Status status;
    const int chosen = topo::nic_for_rank(topo->topo, local_rank, local_size, gpu, &status);
    COLLX_RETURN_IF_ERROR(status);
    *nic = chosen;
    return Status::Ok();
  });
}

collx_status_t collx_topo_bind_cpus(collx_topo_t topo, collx_bind_t mode, int32_t local_rank, int32_t local_size,
                                    int32_t gpu, int32_t* cpus, int32_t capacity, int32_t* count) {
  return api::guarded(nullptr, [&]() -> Status {
    if (!topo) return api::null_handle("topo");
    topo::BindMode m = topo::BindMode::kNone;
    switch (mode) {
      case COLLX_BIND_NONE: m = topo::BindMode::kNone; break;
      case COLLX_BIND_NUMA: m = topo::BindMode::kNuma; break;
      case COLLX_BIND_CORE: m = topo::BindMode::kCore; break;
      case COLLX_BIND_FROM_ENV: COLLX_RETURN_IF_ERROR(topo::parse_bind_mode(setting_raw(SettingId::BIND), &m)); break;
      default: return make_status(COLLX_ERR_INVALID_ARG, "unknown bind mode %d", static_cast<int>(mode));
    }
    std::vector<int> pus;
    COLLX_RETURN_IF_ERROR(topo::bind_cpus(topo->topo, m, local_rank, local_size, gpu, &pus));
    return write_cpus(pus, cpus, capacity, count);
  });
}

collx_status_t collx_topo_ring_order(const char* const* hosts, int32_t nranks, int32_t* order) {
  return api::guarded(nullptr, [&]() -> Status {
    if (nranks < 0) return make_status(COLLX_ERR_INVALID_ARG, "nranks %d is negative", nranks);
    if (nranks > 0 && (!hosts || !order)) return api::null_handle(!hosts ? "hosts" : "order");
    std::vector<std::string> names;
    for (int r = 0; r < nranks; ++r) {
      if (!hosts[r]) return make_status(COLLX_ERR_INVALID_ARG, "hosts[%d] is NULL", r);
      names.emplace_back(hosts[r]);
    }
    const std::vector<int> ring = topo::ring_order_by_host(names);
    for (int i = 0; i < nranks; ++i) order[i] = ring[i];
    return Status::Ok();
  });
}

}  // extern "C"
