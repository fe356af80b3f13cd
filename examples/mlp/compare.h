// Compares two runs of the example step by step: loss and norm relative to the
// reference, parameters by relative L2 error (never max-abs: see strategies.md e.2).
#pragma once

namespace mlp {

// 0 when every step of `run` is within `tolerance` of `reference`, else 1 (printed why).
int compare_runs(const char* reference, const char* run, double tolerance);

}  // namespace mlp
