// collx_explain: why the automatic choice picks what it picks, in words a user can act on
// (which rule or which prediction decided, and what every candidate would cost).
#include <cinttypes>
#include <cstdio>

#include "lib/common/strings.h"
#include "lib/core/comm.h"
#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

Status Communicator::explain(collx_coll_t coll, size_t count, int32_t datatype, std::string* out) const {
  const collx_algorithm_t chosen = choose_algorithm(coll, count, datatype, COLLX_ALGO_AUTO);
  const size_t element = coll == COLLX_COLL_BARRIER ? 0 : datatype_size(datatype);
  const uint64_t bytes = selection_bytes(coll, count, element, size_);
  const std::string rule = settings_.selector.matching_rule(coll, bytes);

  std::string text = string_printf("%s of %" PRIu64 " bytes (count %zu %s) on %d ranks of '%s' over %s\n",
                                   coll_name(coll), bytes, count,
                                   coll == COLLX_COLL_BARRIER ? "-" : datatype_name(datatype), size_,
                                   name_.c_str(), transport_name());
  std::string why = "cost model";
  if (!rule.empty()) {
    why = "COLLX_ALGO rule '" + rule + "'";
    if (chosen == model_.best(coll, bytes, size_, settings_.chunk_bytes)) why += ", same as the cost model";
  }
  text += string_printf("  chosen: %s (%s)\n", algorithm_name(chosen), why.c_str());
  text += "  candidate            predicted_us  messages  chunk_bytes\n";
  for (collx_algorithm_t algorithm : model_.candidates_here(coll)) {
    const Prediction p = model_.predict(coll, algorithm, bytes, size_, settings_.chunk_bytes);
    const bool chunked = algorithm == COLLX_ALGO_RING;
    text += string_printf("  %-20s %12.1f  %8" PRIu64 "  %s%s\n", algorithm_name(algorithm), p.micros, p.messages,
                          chunked ? std::to_string(settings_.chunk_bytes).c_str() : "-",
                          algorithm == chosen ? "  <- chosen" : "");
  }
  const LinkCost& c = model_.cost();
  const std::string source = settings_.tuned.count(model_.transport())
                                 ? "from " + settings_.tune_file
                                 : "built-in defaults; measure with collx-bench --tune";
  text += string_printf("  model: %s alpha %.2f us, beta %.4f ns/byte, gamma %.4f ns/byte (%s)\n",
                        model_.transport().c_str(), c.alpha_us, c.beta_ns_per_byte, c.gamma_ns_per_byte,
                        source.c_str());
  const HostLayout& hosts = model_.hosts();
  if (coll == COLLX_COLL_ALLREDUCE && hosts.hosts > 1 && hosts.max_per_host > 1) {  // comm_hierarchy.cc
    text += string_printf("  hosts: %d, up to %d ranks each%s; hierarchical runs inside hosts over %s (alpha %.2f us, "
                          "beta %.4f ns/byte, gamma %.4f ns/byte), across hosts over %s\n",
                          hosts.hosts, hosts.max_per_host, hosts.uniform ? "" : " (unequal: via host leaders)",
                          hosts.intra_transport.c_str(), hosts.intra.alpha_us, hosts.intra.beta_ns_per_byte,
                          hosts.intra.gamma_ns_per_byte, model_.transport().c_str());
  }
  *out = std::move(text);
  return Status::Ok();
}

}  // namespace collx
