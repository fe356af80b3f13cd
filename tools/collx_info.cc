// collx-info: what this build of collx is, how it is configured and what it would choose.
//   collx-info                      everything below
//   collx-info settings             every COLLX_* setting: default, current value, meaning
//   collx-info algorithms           the algorithm chosen per collective, size and world size
//   collx-info --json               the whole report as one JSON object
//   collx-info --settings-markdown  the environment reference (docs/environment.md)
//   collx-info --algorithms-markdown  the algorithm reference (docs/algorithms.md)
//   collx-info topo [--json|--dot]  this machine's topology (hwloc) as a tree, JSON or Graphviz;
//                                   --xml FILE / --synthetic DESC load another one instead
//   collx-info hang DIR             the stuck collectives named by the flight-record dumps
//                                   (rank<R>.json) in DIR (tools/hang_report.h)
// It links the internal layers: the settings registry and the selector are not in the C ABI.
// Exit status: 0; 1 when COLLX_ALGO does not parse (the error names the rule); 2 for a bad
// command line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "lib/common/settings.h"
#include "lib/common/strings.h"
#include "lib/core/launch_env.h"
#include "lib/core/registry_markdown.h"
#include "lib/core/selection.h"
#include "lib/core/tune_file.h"
#include "lib/topo/topo_load.h"
#include "lib/topo/topo_render.h"
#include "tools/hang_report.h"

#ifndef COLLX_INFO_HAVE_CUDA
#define COLLX_INFO_HAVE_CUDA 0
#endif
#ifndef COLLX_INFO_HAVE_NCCL
#define COLLX_INFO_HAVE_NCCL 0
#endif
#ifndef COLLX_INFO_HAVE_UCX
#define COLLX_INFO_HAVE_UCX 0
#endif
#ifndef COLLX_INFO_HAVE_HWLOC
#define COLLX_INFO_HAVE_HWLOC 0
#endif
#ifndef COLLX_INFO_HAVE_OPENSSL
#define COLLX_INFO_HAVE_OPENSSL 0
#endif
#ifndef COLLX_INFO_HAVE_SHM
#define COLLX_INFO_HAVE_SHM 0  // transports/shm has sources (tools/CMakeLists.txt)
#endif
#ifndef COLLX_INFO_SHM_USED
#define COLLX_INFO_SHM_USED 0  // and lib/core includes it
#endif
#ifndef COLLX_INFO_UCX_USED
#define COLLX_INFO_UCX_USED 0  // lib/core includes transports/ucx (tools/CMakeLists.txt)
#endif

namespace {

struct Feature {
  const char* name;
  bool found;
  const char* note;  // what the build does with it
};

// Optional dependencies as cmake/CollxDependencies.cmake found them. None is used by a layer
// yet; update the note when one is.
const Feature kFeatures[] = {
    {"cuda", COLLX_INFO_HAVE_CUDA, "device buffers: reduction kernels, staging, CUDA IPC (lib/cuda, docs/cuda.md)"},
    {"nccl", COLLX_INFO_HAVE_NCCL, "NCCL route for device buffers, loaded at run time (backends/nccl)"},
    {"ucx", COLLX_INFO_HAVE_UCX, "builds the ucx transport (transports/ucx)"},
    {"hwloc", COLLX_INFO_HAVE_HWLOC, "topology discovery (collx-info topo, include/collx/topology.h)"},
    {"openssl", COLLX_INFO_HAVE_OPENSSL, "job token (COLLX_JOB_TOKEN): HMAC-SHA256 on store and TCP connections"},
};

struct Transport {
  const char* name;
  uint32_t bit;
  bool built;  // its sources are compiled into the library
  bool used;   // the communicator creates it
};

const Transport kTransports[] = {
    {"tcp", COLLX_TRANSPORT_TCP, true, true},
    {"shm", COLLX_TRANSPORT_SHM, COLLX_INFO_HAVE_SHM != 0, COLLX_INFO_SHM_USED != 0},
    {"ucx", COLLX_TRANSPORT_UCX, COLLX_INFO_HAVE_UCX != 0, COLLX_INFO_UCX_USED != 0},
    {"nccl", COLLX_TRANSPORT_NCCL, false, false},
};

struct Size {
  const char* label;
  uint64_t bytes;
};
const Size kSizes[] = {{"8B", 8}, {"64K", 64u << 10}, {"1M", 1u << 20}, {"64M", 64u << 20}};
const int kWorldSizes[] = {2, 4, 8};

// What collx-info shows as a setting's current value: secrets (the job token) only say
// whether they are set, so a report pasted into a bug tracker gives nothing away.
std::string shown_value(const collx::SettingInfo& s) {
  const std::string value = collx::setting_raw(s.id);
  if (s.type != collx::SettingType::kSecret || value.empty()) return value;
  return "(hidden, " + std::to_string(value.size()) + " bytes)";
}

struct Report {
  uint32_t allowed = 0;  // COLLX_TRANSPORTS mask (all when empty)
  std::string transports_error;
  collx::AlgorithmSelector selector;
  // The cost model of the shared-memory transport (what ranks of one host use), from
  // COLLX_TUNE_FILE when it has a line for it, else the built-in defaults.
  collx::CostModel model{"shm", collx::default_link_cost("shm")};
  std::string model_source = "built-in defaults";
};

// Parses COLLX_ALGO and COLLX_TUNE_FILE; prints the error and returns false when invalid.
bool load_selector(Report* r) {
  collx::Status st = collx::AlgorithmSelector::parse(collx::setting_raw(collx::SettingId::ALGO), &r->selector);
  const std::string tune_file = collx::setting_raw(collx::SettingId::TUNE_FILE);
  collx::TunedCosts tuned;
  if (st.ok() && !tune_file.empty()) st = collx::load_tune_file(tune_file, &tuned);
  if (!st.ok()) {
    std::fprintf(stderr, "collx-info: %s\n", st.message().c_str());
    return false;
  }
  if (tuned.count("shm")) {
    r->model = collx::CostModel("shm", tuned["shm"]);
    r->model_source = tune_file;
  }
  return true;
}

void load_transports(Report* r) {
  collx::Status st = collx::parse_transport_list(collx::setting_raw(collx::SettingId::TRANSPORTS), &r->allowed);
  if (!st.ok()) r->transports_error = "COLLX_TRANSPORTS: " + st.message();
  if (r->allowed == 0) r->allowed = ~0u;
}

std::string transport_state(const Report& r, const Transport& t) {
  if (!t.built) return "not built";
  if (!t.used) return "compiled in, not yet used by the communicator";
  if (!r.transports_error.empty()) return "built; COLLX_TRANSPORTS is invalid";
  return (r.allowed & t.bit) ? "usable" : "built, excluded by COLLX_TRANSPORTS";
}

collx_algorithm_t choice(const Report& r, int coll, uint64_t bytes, int world) {
  return r.selector.choose(static_cast<collx_coll_t>(coll), bytes, world, COLLX_ALGO_AUTO, r.model, 512u << 10);
}

void print_header(const Report& r) {
  std::printf("collx library %s (header %s)\n", collx_get_version_string(), COLLX_VERSION_STRING);
  std::printf("\nbuild features:\n");
  for (const Feature& f : kFeatures) {
    std::printf("  %-8s %s%s%s\n", f.name, f.found ? "found" : "not found", f.found ? ": " : "", f.found ? f.note : "");
  }
  std::printf("\ntransports:\n");
  for (const Transport& t : kTransports) std::printf("  %-5s %s\n", t.name, transport_state(r, t).c_str());
  if (!r.transports_error.empty()) std::printf("  (%s)\n", r.transports_error.c_str());
}

void print_settings() {
  size_t count = 0;
  const collx::SettingInfo* all = collx::all_settings(&count);
  std::printf("\nsettings (current value: from the environment, else the default):\n");
  for (size_t i = 0; i < count; ++i) {
    const collx::SettingInfo& s = all[i];
    const bool set = collx::setting_is_set(s.id);
    const std::string current = shown_value(s);
    std::printf("  %s\n", s.name);
    std::printf("      default %s, current %s%s\n", *s.default_value ? s.default_value : "(unset)",
                current.empty() && !set ? "(unset)" : ("'" + current + "'").c_str(),
                set ? " (environment)" : " (default)");
    std::printf("      %s\n", s.meaning);
  }
}

void print_algorithms(const Report& r) {
  const std::string algo = collx::setting_raw(collx::SettingId::ALGO);
  std::printf("\nalgorithms (collectives: description; docs/algorithms.md):\n%s", collx::algorithms_text().c_str());
  std::printf("\nalgorithm choices (size = total buffer bytes; COLLX_ALGO %s; cost model: shm, %s):\n",
              algo.empty() ? "unset" : ("= '" + algo + "'").c_str(), r.model_source.c_str());
  auto line = [](std::string text) {  // without trailing padding
    text.erase(text.find_last_not_of(' ') + 1);
    std::printf("%s\n", text.c_str());
  };
  char cell[64];
  std::string head = "  collective       np";
  for (const Size& s : kSizes) {
    std::snprintf(cell, sizeof(cell), "  %-19s", s.label);
    head += cell;
  }
  line(head);
  for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
    for (int world : kWorldSizes) {
      std::snprintf(cell, sizeof(cell), "  %-15s %3d", collx_coll_name(static_cast<collx_coll_t>(c)), world);
      std::string row = cell;
      for (const Size& s : kSizes) {
        std::snprintf(cell, sizeof(cell), "  %-19s", collx_algorithm_name(choice(r, c, s.bytes, world)));
        row += cell;
      }
      line(row);
    }
  }
}

void print_json(const Report& r) {
  std::string o = "{";
  o += "\"version\": " + collx::json_quote(collx_get_version_string());
  o += ", \"library_version\": " + collx::json_quote(collx_get_version_string());
  o += ", \"header_version\": " + collx::json_quote(COLLX_VERSION_STRING);
  o += ", \"features\": [";
  for (size_t i = 0; i < sizeof(kFeatures) / sizeof(kFeatures[0]); ++i) {
    const Feature& f = kFeatures[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + collx::json_quote(f.name) + ", \"found\": " +
         (f.found ? "true" : "false") + ", \"used\": false, \"note\": " + collx::json_quote(f.found ? f.note : "") + "}";
  }
  o += "], \"transports\": [";
  for (size_t i = 0; i < sizeof(kTransports) / sizeof(kTransports[0]); ++i) {
    const Transport& t = kTransports[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + collx::json_quote(t.name) + ", \"built\": " +
         (t.built ? "true" : "false") + ", \"used\": " + (t.used ? "true" : "false") + ", \"state\": " + collx::json_quote(transport_state(r, t)) + "}";
  }
  o += "], \"settings\": [";
  size_t count = 0;
  const collx::SettingInfo* all = collx::all_settings(&count);
  for (size_t i = 0; i < count; ++i) {
    const collx::SettingInfo& s = all[i];
    const bool set = collx::setting_is_set(s.id);
    o += std::string(i ? ", " : "") + "{\"name\": " + collx::json_quote(s.name) + ", \"type\": " +
         collx::json_quote(collx::setting_type_name(s.type)) + ", \"default\": " +
         (*s.default_value ? collx::json_quote(s.default_value) : "null") + ", \"current\": " +
         (set || *s.default_value ? collx::json_quote(shown_value(s)) : "null") +
         ", \"from_environment\": " + (set ? "true" : "false") + ", \"meaning\": " + collx::json_quote(s.meaning) + "}";
  }
  o += "], \"algorithms\": [";
  bool first = true;
  for (int c = 0; c < COLLX_NUM_COLLS; ++c) {
    for (int world : kWorldSizes) {
      for (const Size& s : kSizes) {
        o += std::string(first ? "" : ", ") + "{\"collective\": " +
             collx::json_quote(collx_coll_name(static_cast<collx_coll_t>(c))) + ", \"world_size\": " +
             std::to_string(world) + ", \"bytes\": " + std::to_string(s.bytes) + ", \"algorithm\": " +
             collx::json_quote(collx_algorithm_name(choice(r, c, s.bytes, world))) + "}";
        first = false;
      }
    }
  }
  o += "]}\n";
  std::fputs(o.c_str(), stdout);
}

int usage(FILE* f) {
  std::fprintf(f,
               "usage: collx-info [settings | algorithms] [--json]\n"
               "       collx-info --settings-markdown | --algorithms-markdown\n"
               "       collx-info topo [--json | --dot] [--xml FILE | --synthetic DESCRIPTION]\n"
               "       collx-info hang DIR\n"
               "  (no argument)        version, build features, transports, settings, algorithm choices\n"
               "  settings             every COLLX_* setting: default, current value, meaning\n"
               "  algorithms           the algorithm chosen per collective, size and world size\n"
               "                       (honours COLLX_ALGO; an invalid COLLX_ALGO exits 1)\n"
               "  --json               the whole report as JSON\n"
               "  --settings-markdown  the environment reference (docs/environment.md)\n"
               "  --algorithms-markdown  which algorithm implements which collective (docs/algorithms.md)\n"
               "  topo                 this machine's topology as a tree (--json: JSON, --dot: Graphviz);\n"
               "                       --xml FILE or --synthetic 'pack:2 core:4 pu:2' load another (hwloc)\n"
               "  hang DIR             one line per stuck collective from the flight-record dumps in DIR:\n"
               "                       the ranks in it, those not in it and where they are (exit 0; 1 when\n"
               "                       nothing is stuck; 2 when DIR has no dump)\n");
  return f == stdout ? 0 : 2;
}

// collx-info topo ...: exit 0, 1 when the topology cannot be loaded, 2 for a bad command line.
int topo_main(int argc, char** argv) {
  enum { kText, kJson, kDot } format = kText;
  std::string xml, synthetic;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && format == kText) {
      format = kJson;
    } else if (a == "--dot" && format == kText) {
      format = kDot;
    } else if ((a == "--xml" || a == "--synthetic") && i + 1 < argc && xml.empty() && synthetic.empty()) {
      (a == "--xml" ? xml : synthetic) = argv[++i];
    } else {
      std::fprintf(stderr, "collx-info topo: unexpected argument '%s'\n", a.c_str());
      return usage(stderr);
    }
  }
  collx::topo::Topology t;
  collx::Status st = !xml.empty()         ? collx::topo::load_xml(xml, &t)
                     : !synthetic.empty() ? collx::topo::load_synthetic(synthetic, &t)
                                          : collx::topo::load_this_machine(&t);
  if (!st.ok()) {
    std::fprintf(stderr, "collx-info: %s\n", st.message().c_str());
    return 1;
  }
  const std::string out = format == kJson  ? collx::topo::to_json(t)
                          : format == kDot ? collx::topo::to_dot(t)
                                           : collx::topo::to_text(t);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--settings-markdown") == 0) {
    if (argc > 2) return usage(stderr);
    std::fputs(collx::settings_markdown().c_str(), stdout);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--algorithms-markdown") == 0) {
    if (argc > 2) return usage(stderr);
    std::fputs(collx::algorithms_markdown().c_str(), stdout);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "topo") == 0) return topo_main(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "hang") == 0) {
    if (argc != 3) return usage(stderr);
    return collx::hang::report_main(argv[2]);
  }
  std::string section;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return usage(stdout);
    if (a == "--json") json = true;
    else if ((a == "settings" || a == "algorithms") && section.empty()) section = a;
    else {
      std::fprintf(stderr, "collx-info: unexpected argument '%s'\n", a.c_str());
      return usage(stderr);
    }
  }
  if (json && !section.empty()) {
    std::fprintf(stderr, "collx-info: --json prints the whole report; drop '%s'\n", section.c_str());
    return usage(stderr);
  }
  Report r;
  load_transports(&r);
  if (section != "settings" && !load_selector(&r)) return 1;
  if (json) {
    print_json(r);
  } else if (section == "settings") {
    print_settings();
  } else if (section == "algorithms") {
    print_algorithms(r);
  } else {
    print_header(r);
    print_settings();
    print_algorithms(r);
  }
  return 0;
}
