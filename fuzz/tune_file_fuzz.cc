// libFuzzer target for the tune-file parser (lib/core/tune_file.h): COLLX_TUNE_FILE names a
// file every communicator reads, and collx-bench --tune rewrites it. Properties: no crash; a
// refusal is COLLX_ERR_INVALID_ARG naming the source and a line; every accepted constant is
// finite and positive under a transport name without blanks; and what parses, formatted by
// format_tune_file, parses again to the same transports (constants equal to the printed
// precision, where they are large enough to survive it).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/core/tune_file.h"

using namespace collx;

namespace {

bool valid(double value) { return std::isfinite(value) && value > 0; }

// format_tune_file prints alpha with 3 decimals, beta and gamma with 4.
bool survives_printing(const LinkCost& c) { return c.alpha_us >= 1e-3 && c.beta_ns_per_byte >= 1e-4 && c.gamma_ns_per_byte >= 1e-4; }
bool close(double a, double b, double decimals) { return std::fabs(a - b) <= 0.51 * std::pow(10.0, -decimals) + 1e-12 * std::fabs(a); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  TunedCosts costs;
  Status status = parse_tune_text(text, "fuzz.tune", &costs);
  if (!status.ok()) {
    if (status.code() != COLLX_ERR_INVALID_ARG) std::abort();
    if (status.message().rfind("tune file fuzz.tune, line ", 0) != 0) std::abort();
    return 0;
  }
  bool printable = true;
  for (const auto& [transport, cost] : costs) {
    if (transport.empty() || transport.find_first_of(" \t\r\n\v\f") != std::string::npos) std::abort();
    if (!valid(cost.alpha_us) || !valid(cost.beta_ns_per_byte) || !valid(cost.gamma_ns_per_byte)) std::abort();
    printable = printable && survives_printing(cost);
  }
  if (!printable) return 0;
  TunedCosts again;
  if (!parse_tune_text(format_tune_file(costs), "formatted", &again).ok()) std::abort();
  if (again.size() != costs.size()) std::abort();
  for (const auto& [transport, cost] : costs) {
    auto it = again.find(transport);
    if (it == again.end()) std::abort();
    if (!close(it->second.alpha_us, cost.alpha_us, 3) || !close(it->second.beta_ns_per_byte, cost.beta_ns_per_byte, 4) ||
        !close(it->second.gamma_ns_per_byte, cost.gamma_ns_per_byte, 4))
      std::abort();
  }
  return 0;
}
