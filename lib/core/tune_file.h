// Tune files: the cost model's constants measured where the job runs.
//
//   # collx tune file 1
//   # transport alpha_us beta_ns_per_byte gamma_ns_per_byte
//   shm 3.1 0.142 0.231
//   tcp 28.0 0.51 0.231
//
// `collx-bench --tune FILE` writes one line for the transport it ran over (replacing an
// older line for it); COLLX_TUNE_FILE=FILE makes every communicator use the line of its
// transport, and the built-in defaults (cost_model.h) for transports the file lacks.
#pragma once

#include <map>
#include <string>

#include "lib/common/status.h"
#include "lib/core/cost_model.h"

namespace collx {

using TunedCosts = std::map<std::string, LinkCost>;

// COLLX_ERR_INVALID_ARG naming the file and line for anything malformed (unknown version,
// wrong field count, a number that is not finite and positive, a transport listed twice).
Status parse_tune_text(const std::string& text, const std::string& source, TunedCosts* out);
Status load_tune_file(const std::string& path, TunedCosts* out);
std::string format_tune_file(const TunedCosts& costs);

}  // namespace collx
