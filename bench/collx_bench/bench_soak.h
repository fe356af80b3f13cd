// collx-bench soak: many back-to-back small all-reduces, then many communicator
// create/destroy cycles, with resident memory and open file descriptors measured before and
// after each phase. A leak shows as growth; the verdict is "flat" when every rank grew by
// less than the thresholds.
#pragma once

namespace collx_bench {

int bench_soak_main(int argc, char** argv);

}  // namespace collx_bench
