// The algorithm registry (algorithms/registry.h) in words: docs/algorithms.md and the table
// collx-info prints, generated so that neither can drift from what the library runs.
#pragma once

#include <string>

namespace collx {

// docs/algorithms.md: every algorithm with the collectives it implements, whether the
// automatic choice considers it, what it needs and its description.
std::string algorithms_markdown();

// One line per algorithm: "  ring                 allreduce, reduce_scatter, allgather: ...".
std::string algorithms_text();

}  // namespace collx
