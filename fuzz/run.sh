#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them from their seed corpus.
#   fuzz/run.sh [TARGET|all] [RUNS]       e.g. fuzz/run.sh tcp_wire 1000000
# TARGET: store_wire, store_handshake, tcp_wire, tcp_stream, ucx_wire, host_identity, shm_ring, tune_file, flight_record,
# collx_run_offers or all (default); RUNS: executions
# per target (default 1000000). BUILD_DIR (default build-fuzz-clang) holds the build and the
# corpus each run grows (BUILD_DIR/fuzz-corpus/TARGET); the checked-in seeds in
# fuzz/corpus/TARGET are only read. One process per target (no -jobs): the fuzzers share the
# machine. A crash leaves its input as BUILD_DIR/crash-* and this script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
TARGETS_ALL="store_wire store_handshake tcp_wire tcp_stream ucx_wire host_identity shm_ring tune_file flight_record collx_run_offers"
target="${1:-all}"
runs="${2:-1000000}"
build="${BUILD_DIR:-build-fuzz-clang}"
[ "$target" = all ] && target="$TARGETS_ALL"

command -v clang++ >/dev/null || { echo "fuzz/run.sh: clang++ not found (apt-get install -y clang)" >&2; exit 1; }
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLX_FUZZ=ON \
    -DCOLLX_BUILD_TESTS=OFF -DCOLLX_BUILD_BENCH=OFF -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null 2>&1
fi
for t in $target; do
  cmake --build "$build" -j "${JOBS:-2}" --target "${t}_fuzz" >"$build/fuzz-build.log" 2>&1 || {
    cat "$build/fuzz-build.log"; exit 1; }
done
for t in $target; do
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work"
  echo "== $t: $runs runs"
  log="$build/$t.log"
  (cd "$build" && "./fuzz/${t}_fuzz" -runs="$runs" -print_final_stats=1 "fuzz-corpus/$t" "$root/fuzz/corpus/$t") >"$log" 2>&1 || {
    tail -40 "$log"; echo "fuzz/run.sh: $t FAILED (log: $log)" >&2; exit 1; }
  # The final stats: executions and their rate, and the size of the corpus reached.
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)' "$log" | sed 's/^/  /'
  grep -E '^#[0-9]+.*DONE' "$log" | tail -1 | sed 's/^/  /'
done
