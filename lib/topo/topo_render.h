// The topology as text for people (an indented tree), as JSON for programs, and as a
// Graphviz drawing (`collx-info topo [--json | --dot]`).
#pragma once

#include <string>
#include <vector>

#include "lib/topo/topology.h"

namespace collx {
namespace topo {

std::string to_text(const Topology& topo);
std::string to_json(const Topology& topo);
std::string to_dot(const Topology& topo);

// "0-3,8,10-11" for {0,1,2,3,8,10,11}; "" for none.
std::string cpu_list(const std::vector<int>& pus);

}  // namespace topo
}  // namespace collx
