// Topology decisions (see topo_decide.h).
#include "lib/topo/topo_decide.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace collx {
namespace topo {

namespace {
Status check_rank(int local_rank, int local_size) {
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return make_status(COLLX_ERR_INVALID_ARG, "topology: local rank %d of %d is out of range", local_rank,
                       local_size);
  }
  return Status::Ok();
}

Status check_gpu(const Topology& topo, int gpu) {
  if (gpu < -1 || gpu >= static_cast<int>(topo.gpus.size())) {
    return make_status(COLLX_ERR_INVALID_ARG, "topology: GPU %d does not exist (this machine has %zu)", gpu,
                       topo.gpus.size());
  }
  return Status::Ok();
}

// Block distribution of `n` slots over `size` ranks.
int block_of(int rank, int size, int n) {
  return static_cast<int>(static_cast<int64_t>(rank) * n / size);
}
}  // namespace

Status parse_bind_mode(const std::string& text, BindMode* out) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.empty() || t == "none") {
    *out = BindMode::kNone;
  } else if (t == "numa") {
    *out = BindMode::kNuma;
  } else if (t == "core") {
    *out = BindMode::kCore;
  } else {
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_BIND='%s' is not one of numa, core, none", text.c_str());
  }
  return Status::Ok();
}

const char* bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::kNuma: return "numa";
    case BindMode::kCore: return "core";
    case BindMode::kNone: break;
  }
  return "none";
}

int numa_for_local_rank(const Topology& topo, int local_rank, int local_size) {
  if (topo.numa_nodes.empty() || !check_rank(local_rank, local_size).ok()) return -1;
  return block_of(local_rank, local_size, static_cast<int>(topo.numa_nodes.size()));
}

int nearest_numa_of_pci(const Topology& topo, const std::string& busid) {
  const std::string full = busid.size() == 7 ? "0000:" + busid : busid;
  for (const PciDevice& d : topo.pci) {
    if (d.busid == full) return d.numa;
  }
  return -1;
}

int home_numa(const Topology& topo, int local_rank, int local_size, int gpu) {
  const int gpu_node = topo.gpu_numa(gpu);
  return gpu_node >= 0 ? gpu_node : numa_for_local_rank(topo, local_rank, local_size);
}

Status bind_cpus(const Topology& topo, BindMode mode, int local_rank, int local_size, int gpu,
                 std::vector<int>* pus) {
  COLLX_RETURN_IF_ERROR(check_rank(local_rank, local_size));
  COLLX_RETURN_IF_ERROR(check_gpu(topo, gpu));
  pus->clear();
  switch (mode) {
    case BindMode::kNone:
      return Status::Ok();
    case BindMode::kNuma: {
      const int node = home_numa(topo, local_rank, local_size, gpu);
      if (node < 0) return make_status(COLLX_ERR_UNSUPPORTED, "COLLX_BIND=numa: the topology has no NUMA node");
      *pus = topo.numa_nodes[node].pus;
      return Status::Ok();
    }
    case BindMode::kCore: {
      if (topo.cores.empty()) return make_status(COLLX_ERR_UNSUPPORTED, "COLLX_BIND=core: the topology has no core");
      *pus = topo.cores[block_of(local_rank, local_size, static_cast<int>(topo.cores.size()))].pus;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

int nic_for_rank(const Topology& topo, int local_rank, int local_size, int gpu, Status* status) {
  Status s = check_rank(local_rank, local_size);
  if (s.ok()) s = check_gpu(topo, gpu);
  if (status) *status = s;
  if (!s.ok() || topo.nics.empty()) return -1;
  const int node = home_numa(topo, local_rank, local_size, gpu);
  const int package = node >= 0 ? topo.numa_nodes[node].package : -1;
  // Rank by (distance, -speed): 0 same NUMA node, 1 same package, 2 elsewhere or unknown.
  auto key = [&](int nic) {
    const int n = topo.nic_numa(nic);
    const int p = topo.nic_package(nic);
    const int distance = node >= 0 && n == node ? 0 : package >= 0 && p == package ? 1 : 2;
    return std::make_tuple(distance, -topo.nics[nic].speed_mbps);
  };
  std::vector<int> best;
  for (int i = 0; i < static_cast<int>(topo.nics.size()); ++i) {
    if (best.empty() || key(i) < key(best[0])) {
      best.assign(1, i);
    } else if (key(i) == key(best[0])) {
      best.push_back(i);
    }
  }
  return best[static_cast<size_t>(local_rank) % best.size()];
}

std::vector<int> ring_order_by_host(const std::vector<std::string>& host_of_rank) {
  std::map<std::string, int> first_rank;
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) first_rank.emplace(host_of_rank[r], r);
  std::vector<int> order(host_of_rank.size());
  for (int r = 0; r < static_cast<int>(order.size()); ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return first_rank[host_of_rank[a]] < first_rank[host_of_rank[b]]; });
  return order;
}

}  // namespace topo
}  // namespace collx
