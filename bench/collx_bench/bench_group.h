// collx-bench group: N small all-reduces one by one against the same N inside
// collx_group_start/end (fused), in one run (see bench_group.cc).
#pragma once

namespace collx_bench {

int bench_group_main(int argc, char** argv);

}  // namespace collx_bench
