#include "lib/core/nic_choice.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>

#include "lib/topo/topo_decide.h"

namespace collx {

std::vector<std::string> interfaces_on_subnet_of(const std::string& route_ip) {
  std::vector<std::string> names;
  in_addr route{};
  if (inet_pton(AF_INET, route_ip.c_str(), &route) != 1) return names;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return names;
  // The route address's netmask first, then every interface inside that subnet.
  uint32_t mask = 0;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !a->ifa_netmask) continue;
    if (reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == route.s_addr) {
      mask = reinterpret_cast<sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr;
    }
  }
  for (ifaddrs* a = list; mask != 0 && a != nullptr; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    const uint32_t address = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    if ((address & mask) == (route.s_addr & mask) &&
        std::find(names.begin(), names.end(), a->ifa_name) == names.end()) {
      names.push_back(a->ifa_name);
    }
  }
  freeifaddrs(list);
  return names;
}

std::string nearest_reachable_nic(const topo::Topology& machine, const std::vector<std::string>& reachable,
                                  int local_rank, int local_size) {
  topo::Topology candidates = machine;
  candidates.nics.erase(std::remove_if(candidates.nics.begin(), candidates.nics.end(),
                                       [&](const topo::Nic& nic) {
                                         return std::find(reachable.begin(), reachable.end(), nic.name) ==
                                                reachable.end();
                                       }),
                        candidates.nics.end());
  const int nic = topo::nic_for_rank(candidates, local_rank, local_size, /*gpu=*/-1);
  return nic < 0 ? std::string() : candidates.nics[static_cast<size_t>(nic)].name;
}

}  // namespace collx
