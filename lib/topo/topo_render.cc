// Text, JSON and Graphviz renderings of a Topology (see topo_render.h).
#include "lib/topo/topo_render.h"

#include <cinttypes>

#include "lib/common/status.h"

namespace collx {
namespace topo {

namespace {

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      o += string_printf("\\u%04x", c);
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

// A Graphviz string: quotes escaped, line breaks as \n.
std::string dot_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '\n') {
      o += "\\n";
    } else {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
  }
  return o + "\"";
}

std::string json_ints(const std::vector<int>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + std::to_string(v[i]);
  return o + "]";
}

// Joins items rendered by `one` into a JSON array.
template <typename T, typename F>
std::string json_array(const std::vector<T>& items, F one) {
  std::string o = "[";
  for (size_t i = 0; i < items.size(); ++i) o += (i ? ", " : "") + one(items[i]);
  return o + "]";
}

std::string bytes_text(uint64_t b) {
  if (b >= (1ull << 30)) return string_printf("%.1f GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return string_printf("%" PRIu64 " MiB", b >> 20);
  if (b >= (1ull << 10)) return string_printf("%" PRIu64 " KiB", b >> 10);
  return string_printf("%" PRIu64 " B", b);
}

std::string numa_text(int numa) { return numa >= 0 ? "NUMA " + std::to_string(numa) : "no single NUMA node"; }

std::string speed_text(int64_t mbps) {
  if (mbps <= 0) return "speed unknown";
  return mbps % 1000 == 0 ? string_printf("%" PRId64 " Gb/s", mbps / 1000) : string_printf("%" PRId64 " Mb/s", mbps);
}

std::string pci_busid(const Topology& t, int pci) { return pci >= 0 ? t.pci[pci].busid : std::string(); }

void text_numa(const Topology& t, int n, const std::string& indent, std::string* o) {
  const NumaNode& node = t.numa_nodes[n];
  *o += string_printf("%sNUMA node %d (os %d): %s, PUs %s\n", indent.c_str(), n, node.os_index,
                      bytes_text(node.memory_bytes).c_str(), cpu_list(node.pus).c_str());
  for (size_t c = 0; c < t.cores.size(); ++c) {
    if (t.cores[c].numa != n) continue;
    *o += string_printf("%s  core %zu: PUs %s\n", indent.c_str(), c, cpu_list(t.cores[c].pus).c_str());
  }
}

}  // namespace

std::string cpu_list(const std::vector<int>& pus) {
  std::string o;
  for (size_t i = 0; i < pus.size();) {
    size_t j = i;
    while (j + 1 < pus.size() && pus[j + 1] == pus[j] + 1) ++j;
    if (!o.empty()) o += ",";
    o += j == i ? std::to_string(pus[i]) : std::to_string(pus[i]) + "-" + std::to_string(pus[j]);
    i = j + 1;
  }
  return o;
}

std::string to_text(const Topology& t) {
  std::string o = string_printf("host %s (%s): packages %zu, NUMA nodes %zu, cores %zu, PUs %zu\n",
                                t.hostname.empty() ? "?" : t.hostname.c_str(), t.source.c_str(), t.packages.size(),
                                t.numa_nodes.size(), t.cores.size(), t.pus.size());
  for (size_t p = 0; p < t.packages.size(); ++p) {
    o += string_printf("  package %zu (os %d): PUs %s\n", p, t.packages[p].os_index, cpu_list(t.packages[p].pus).c_str());
    for (size_t n = 0; n < t.numa_nodes.size(); ++n) {
      if (t.numa_nodes[n].package == static_cast<int>(p)) text_numa(t, static_cast<int>(n), "    ", &o);
    }
  }
  for (size_t n = 0; n < t.numa_nodes.size(); ++n) {
    if (t.numa_nodes[n].package < 0) text_numa(t, static_cast<int>(n), "  ", &o);
  }
  if (!t.caches.empty()) {
    o += "  caches:";
    // Consecutive caches of one kind and size are counted, not listed.
    for (size_t i = 0; i < t.caches.size();) {
      size_t j = i;
      while (j < t.caches.size() && t.caches[j].level == t.caches[i].level && t.caches[j].type == t.caches[i].type &&
             t.caches[j].bytes == t.caches[i].bytes) {
        ++j;
      }
      const char* kind = t.caches[i].type == 'd' ? "d" : t.caches[i].type == 'i' ? "i" : "";
      o += string_printf(" L%d%s %s x%zu%s", t.caches[i].level, kind, bytes_text(t.caches[i].bytes).c_str(), j - i,
                         j < t.caches.size() ? "," : "");
      i = j;
    }
    o += "\n";
  }
  o += string_printf("  PCI devices: %zu\n", t.pci.size());
  for (const PciDevice& d : t.pci) {
    o += string_printf("    %s [%04x:%04x] class %04x, %s\n", d.busid.c_str(), d.vendor, d.device, d.class_id,
                       numa_text(d.numa).c_str());
  }
  o += string_printf("  GPUs: %zu\n", t.gpus.size());
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    o += string_printf("    gpu %zu: %s%s%s, PCI %s, %s\n", g, t.gpus[g].name.c_str(), t.gpus[g].model.empty() ? "" : " ",
                       t.gpus[g].model.c_str(), pci_busid(t, t.gpus[g].pci).c_str(), numa_text(t.gpu_numa(static_cast<int>(g))).c_str());
  }
  o += string_printf("  network interfaces: %zu\n", t.nics.size());
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const Nic& n = t.nics[i];
    o += string_printf("    %s%s%s: %s, PCI %s, %s\n", n.name.c_str(), n.fabric.empty() || n.fabric == n.name ? "" : " / ",
                       n.fabric == n.name ? "" : n.fabric.c_str(), speed_text(n.speed_mbps).c_str(),
                       n.pci >= 0 ? t.pci[n.pci].busid.c_str() : "none", numa_text(t.nic_numa(static_cast<int>(i))).c_str());
  }
  return o;
}

std::string to_json(const Topology& t) {
  std::string o = "{\"source\": " + json_str(t.source) + ", \"hostname\": " + json_str(t.hostname);
  o += ", \"packages\": " + json_array(t.packages, [](const Package& p) {
    return string_printf("{\"os_index\": %d, \"pus\": ", p.os_index) + json_ints(p.pus) + "}";
  });
  o += ", \"numa_nodes\": " + json_array(t.numa_nodes, [](const NumaNode& n) {
    return string_printf("{\"os_index\": %d, \"package\": %d, \"memory_bytes\": %" PRIu64 ", \"pus\": ", n.os_index,
                         n.package, n.memory_bytes) + json_ints(n.pus) + "}";
  });
  o += ", \"cores\": " + json_array(t.cores, [](const Core& c) {
    return string_printf("{\"os_index\": %d, \"package\": %d, \"numa\": %d, \"pus\": ", c.os_index, c.package, c.numa) +
           json_ints(c.pus) + "}";
  });
  o += ", \"pus\": " + json_array(t.pus, [](const Pu& p) {
    return string_printf("{\"os_index\": %d, \"core\": %d, \"numa\": %d, \"package\": %d}", p.os_index, p.core, p.numa,
                         p.package);
  });
  o += ", \"caches\": " + json_array(t.caches, [](const Cache& c) {
    return string_printf("{\"level\": %d, \"type\": \"%c\", \"bytes\": %" PRIu64 ", \"pus\": ", c.level, c.type, c.bytes) +
           json_ints(c.pus) + "}";
  });
  o += ", \"pci\": " + json_array(t.pci, [](const PciDevice& d) {
    return "{\"busid\": " + json_str(d.busid) +
           string_printf(", \"vendor\": \"0x%04x\", \"device\": \"0x%04x\", \"class\": \"0x%04x\", \"numa\": %d, "
                         "\"package\": %d, \"pus\": ", d.vendor, d.device, d.class_id, d.numa, d.package) +
           json_ints(d.pus) + "}";
  });
  o += ", \"gpus\": " + json_array(t.gpus, [&](const Gpu& g) {
    return "{\"name\": " + json_str(g.name) + ", \"model\": " + json_str(g.model) + ", \"pci\": " +
           json_str(pci_busid(t, g.pci)) + string_printf(", \"numa\": %d}", g.pci >= 0 ? t.pci[g.pci].numa : -1);
  });
  o += ", \"nics\": " + json_array(t.nics, [&](const Nic& n) {
    return "{\"name\": " + json_str(n.name) + ", \"fabric\": " + json_str(n.fabric) +
           string_printf(", \"speed_mbps\": %" PRId64 ", \"pci\": ", n.speed_mbps) + json_str(pci_busid(t, n.pci)) +
           string_printf(", \"numa\": %d}", n.pci >= 0 ? t.pci[n.pci].numa : -1);
  });
  return o + "}\n";
}

std::string to_dot(const Topology& t) {
  std::string o = "graph topology {\n  node [shape=box, fontname=\"Helvetica\"];\n";
  o += "  machine [label=" + dot_str("host " + t.hostname) + "];\n";
  for (size_t p = 0; p < t.packages.size(); ++p) {
    o += string_printf("  package%zu [label=\"package %zu\\nPUs %s\"];\n  machine -- package%zu;\n", p, p,
                       cpu_list(t.packages[p].pus).c_str(), p);
  }
  for (size_t n = 0; n < t.numa_nodes.size(); ++n) {
    const NumaNode& node = t.numa_nodes[n];
    o += string_printf("  numa%zu [label=\"NUMA %zu\\n%s\\nPUs %s\", style=filled, fillcolor=lightyellow];\n", n, n,
                       bytes_text(node.memory_bytes).c_str(), cpu_list(node.pus).c_str());
    o += node.package >= 0 ? string_printf("  package%d -- numa%zu;\n", node.package, n)
                           : string_printf("  machine -- numa%zu;\n", n);
  }
  auto attach = [&](int numa, int package) {
    if (numa >= 0) return string_printf("numa%d", numa);
    if (package >= 0) return string_printf("package%d", package);
    return std::string("machine");
  };
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    const int pci = t.gpus[g].pci;
    o += string_printf("  gpu%zu [label=%s, style=filled, fillcolor=palegreen];\n  %s -- gpu%zu;\n", g,
                       dot_str(t.gpus[g].name + "\n" + pci_busid(t, pci)).c_str(),
                       attach(t.gpu_numa(static_cast<int>(g)), pci >= 0 ? t.pci[pci].package : -1).c_str(), g);
  }
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const Nic& n = t.nics[i];
    o += string_printf("  nic%zu [label=%s, style=filled, fillcolor=lightblue];\n  %s -- nic%zu;\n", i,
                       dot_str(n.name + "\n" + speed_text(n.speed_mbps)).c_str(),
                       attach(t.nic_numa(static_cast<int>(i)), t.nic_package(static_cast<int>(i))).c_str(), i);
  }
  return o + "}\n";
}

}  // namespace topo
}  // namespace collx
