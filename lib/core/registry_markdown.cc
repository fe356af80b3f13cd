#include "lib/core/registry_markdown.h"

#include "algorithms/registry.h"
#include "lib/common/status.h"
#include "lib/core/names.h"

namespace collx {

namespace {

// When the automatic choice considers `algorithm` (for some collective).
std::string automatic(const algo::AlgorithmInfo& info) {
  if (info.needs & algo::kNeedsSharedBoards) return "when every rank is on one host over shm";
  if (info.needs & algo::kNeedsSeveralHosts) return "when ranks span hosts, two or more on some host";
  size_t count = 0;
  const algo::Implementation* table = algo::implementations(&count);
  for (size_t i = 0; i < count; ++i) {
    if (table[i].algorithm == info.id && table[i].auto_order >= 0) return "yes";
  }
  return "no (force it, or name it in COLLX_ALGO)";
}

// Whether a closed group may fuse `algorithm`'s all-reduces (fixed_order_bytes).
std::string fused_in_group(const algo::AlgorithmInfo& info) {
  const algo::Implementation* entry = algo::find_implementation(info.id, COLLX_COLL_ALLREDUCE);
  if (!entry || entry->fixed_order_bytes == algo::kNotFixedOrder) return "no";
  if (entry->fixed_order_bytes == algo::kFixedOrderAnySize) return "allreduce";
  return string_printf("allreduce up to %llu bytes", static_cast<unsigned long long>(entry->fixed_order_bytes));
}

}  // namespace

std::string algorithms_markdown() {
  std::string out =
      "# Algorithms\n\n"
      "Generated from the algorithm registry (`algorithms/registry.cc`); do not edit by hand.\n"
      "Regenerate with `build/tools/collx-info --algorithms-markdown > docs/algorithms.md`.\n\n"
      "Force one with `collx_opts_t.algorithm` or name it in `COLLX_ALGO` (docs/tuning.md); an\n"
      "algorithm that does not implement the collective is refused with `COLLX_ERR_INVALID_ARG`.\n"
      "Every algorithm takes any number of ranks and the reductions sum, prod, min and max.\n"
      "\"Fused in a group\": the all-reduces a closed group may pack into one message, those the\n"
      "algorithm reduces element by element in one fixed order of the ranks (docs/groups.md).\n\n"
      "| algorithm | value | collectives | automatic choice | fused in a group | description |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (int a = 1; a < COLLX_NUM_ALGORITHMS; ++a) {
    const algo::AlgorithmInfo& info = algo::algorithms()[a];
    out += string_printf("| `%s` | %d | %s | %s | %s | %s |\n", info.name, a, colls_of(a).c_str(),
                         automatic(info).c_str(), fused_in_group(info).c_str(), info.description);
  }
  return out;
}

std::string algorithms_text() {
  std::string out;
  for (int a = 1; a < COLLX_NUM_ALGORITHMS; ++a) {
    const algo::AlgorithmInfo& info = algo::algorithms()[a];
    out += string_printf("  %-19s %s: %s\n", info.name, colls_of(a).c_str(), info.description);
  }
  return out;
}

}  // namespace collx
