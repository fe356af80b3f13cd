#include "tools/collx_run/run_options.h"

#include <cerrno>
#include <cstdlib>

namespace collx_run {

namespace {

bool parse_int64(const std::string& text, int64_t min, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > INT32_MAX) return false;
  *out = value;
  return true;
}

bool parse_int(const std::string& text, int min, int* out) {
  int64_t value = 0;
  if (!parse_int64(text, min, &value)) return false;
  *out = static_cast<int>(value);
  return true;
}

// "N" or "MIN:MAX".
bool parse_nnodes(const std::string& text, RunOptions* out) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    if (!parse_int(text, 1, &out->min_nodes)) return false;
    out->max_nodes = out->min_nodes;
    return true;
  }
  return parse_int(text.substr(0, colon), 1, &out->min_nodes) &&
         parse_int(text.substr(colon + 1), 1, &out->max_nodes) && out->min_nodes <= out->max_nodes;
}

// Torchrun spells flags with underscores; accept both.
std::string normalize_flag(std::string flag) {
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

// Applies one "--name value" pair; false with *error set when the value is bad.
bool apply_flag(const std::string& name, const std::string& value, RunOptions* o, std::string* error) {
  bool ok = true;
  int64_t seconds = 0;
  if (name == "--nproc-per-node") ok = parse_int(value, 1, &o->nproc_per_node);
  else if (name == "--nnodes") ok = parse_nnodes(value, o);
  else if (name == "--node-rank") ok = parse_int(value, 0, &o->node_rank);
  else if (name == "--rdzv-endpoint") { o->endpoint = value; ok = !value.empty(); }
  else if (name == "--rdzv-id") { o->run_id = value; ok = !value.empty() && value.find('/') == std::string::npos; }
  else if (name == "--max-restarts") ok = parse_int(value, 0, &o->max_restarts);
  else if (name == "--rdzv-timeout") { ok = parse_int64(value, 1, &seconds); o->rdzv_timeout_ms = seconds * 1000; }
  else if (name == "--heartbeat-timeout") { ok = parse_int64(value, 1, &seconds); o->heartbeat_timeout_ms = seconds * 1000; }
  else if (name == "--stop-grace") { ok = parse_int64(value, 0, &seconds); o->stop_grace_ms = seconds * 1000; }
  else {
    *error = "unknown flag " + name;
    return false;
  }
  if (!ok) *error = "bad value '" + value + "' for " + name;
  return ok;
}

}  // namespace

const char* run_usage_text() {
  return "usage: collx-run --nproc-per-node N [--nnodes N|MIN:MAX] [--node-rank R]\n"
         "                 [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--max-restarts K]\n"
         "                 [--rdzv-timeout SEC] [--heartbeat-timeout SEC] [--stop-grace SEC]\n"
         "                 [--standalone] [--] PROGRAM ARGS...\n"
         "Starts N ranks of PROGRAM on this node with COLLX_* and torchrun variables set,\n"
         "prefixes their output with [rank], and stops and restarts the whole job on every\n"
         "node when a rank fails. See docs/collx-run.md.\n"
         "A single-node job without COLLX_JOB_TOKEN gets a random one; a multi-node job must\n"
         "set the same COLLX_JOB_TOKEN in every node's environment (docs/security.md).\n";
}

ParseResult parse_run_options(int argc, char** argv, RunOptions* out, std::string* error) {
  RunOptions o;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.compare(0, 2, "--") != 0) break;  // the program starts here
    arg = normalize_flag(arg);
    if (arg == "--help" || arg == "-h") return ParseResult::kHelp;
    if (arg == "--standalone") {
      o.standalone = true;
      continue;
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = "flag " + arg + " needs a value";
      return ParseResult::kError;
    }
    if (!apply_flag(arg, value, &o, error)) return ParseResult::kError;
  }
  for (; i < argc; ++i) o.program.push_back(argv[i]);
  if (o.program.empty()) {
    *error = "no PROGRAM to run";
    return ParseResult::kError;
  }
  if (o.standalone) {
    if (o.max_nodes != 1) {
      *error = "--standalone runs one node; drop --nnodes or --standalone";
      return ParseResult::kError;
    }
    o.endpoint.clear();
  }
  if (o.endpoint.empty() && o.max_nodes > 1) {
    *error = "--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)";
    return ParseResult::kError;
  }
  if (o.node_rank >= o.max_nodes) {
    *error = "--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
             std::to_string(o.max_nodes);
    return ParseResult::kError;
  }
  *out = std::move(o);
  return ParseResult::kRun;
}

}  // namespace collx_run
