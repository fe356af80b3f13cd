#include "lib/core/tune_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "lib/common/strings.h"

namespace collx {
namespace {

constexpr const char* kHeader = "# collx tune file 1";

Status bad_line(const std::string& source, int line, const std::string& why) {
  return make_status(COLLX_ERR_INVALID_ARG, "tune file %s, line %d: %s", source.c_str(), line, why.c_str());
}

bool parse_positive(const std::string& text, double* out) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || value <= 0) return false;
  *out = value;
  return true;
}

}  // namespace

Status parse_tune_text(const std::string& text, const std::string& source, TunedCosts* out) {
  TunedCosts costs;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  bool versioned = false;
  while (std::getline(in, raw)) {
    ++line;
    const std::string trimmed = trim(raw);
    if (trimmed.rfind("# collx tune file", 0) == 0) {
      if (trimmed != kHeader) return bad_line(source, line, "unsupported version '" + trimmed + "' (expected '" + kHeader + "')");
      versioned = true;
      continue;
    }
    if (trimmed.empty() || trimmed[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream words(trimmed);
    for (std::string word; words >> word;) fields.push_back(word);
    if (fields.size() != 4) {
      return bad_line(source, line, "expected 'TRANSPORT ALPHA_US BETA_NS_PER_BYTE GAMMA_NS_PER_BYTE', got '" + trimmed + "'");
    }
    LinkCost cost;
    if (!parse_positive(fields[1], &cost.alpha_us) || !parse_positive(fields[2], &cost.beta_ns_per_byte) ||
        !parse_positive(fields[3], &cost.gamma_ns_per_byte)) {
      return bad_line(source, line, "the three constants must be positive numbers: '" + trimmed + "'");
    }
    for (const char c : fields[0]) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return bad_line(source, line, "the transport name holds a control character: '" + trimmed + "'");
      }
    }
    if (!costs.emplace(fields[0], cost).second) {
      return bad_line(source, line, "transport '" + fields[0] + "' is listed twice");
    }
  }
  if (!versioned) return bad_line(source, 1, std::string("missing the '") + kHeader + "' line");
  *out = std::move(costs);
  return Status::Ok();
}

Status load_tune_file(const std::string& path, TunedCosts* out) {
  std::ifstream file(path);
  if (!file) {
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_TUNE_FILE=%s cannot be read (write one with collx-bench --tune)",
                       path.c_str());
  }
  std::stringstream text;
  text << file.rdbuf();
  return parse_tune_text(text.str(), path, out);
}

std::string format_tune_file(const TunedCosts& costs) {
  std::string text = std::string(kHeader) + "\n# transport alpha_us beta_ns_per_byte gamma_ns_per_byte\n";
  for (const auto& [transport, cost] : costs) {
    // string_printf, not a fixed buffer: a long transport name must not be cut off.
    text += transport + string_printf(" %.3f %.4f %.4f\n", cost.alpha_us, cost.beta_ns_per_byte, cost.gamma_ns_per_byte);
  }
  return text;
}

}  // namespace collx
