#!/usr/bin/env bash
# GPU check of collx (docs/cuda.md): builds, runs the GPU test tier, runs the GPU benchmarks and
# prints one short table last. Meant for one H200 in under 8 minutes:
#
#   bash bench/gpu/check.sh [BUILD_DIR]        (from the repository root; default build-gpu)
#
# Reuses BUILD_DIR when it already holds a build (e.g. one made elsewhere and copied over).
# Environment: JOBS (default: all cores), CHECK_MIB (all-reduce size, default 256),
# KERNEL_MIB (kernel bench buffers, default 1024).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
MIB=${CHECK_MIB:-256}
KMIB=${KERNEL_MIB:-1024}
LOG=$BUILD/gpu-check.log
mkdir -p "$BUILD"
: >"$LOG"
step() { echo "== $* ($(date +%T))"; }

# nccl.h and libnccl: the CUDA toolkit's, else PyTorch's wheel (nvidia/nccl), else the system's.
nccl_args=()
if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  inc=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null)
  [ -n "$inc" ] && [ -f "$inc/nccl.h" ] && nccl_args+=(-DCOLLX_NCCL_INCLUDE_DIR="$inc")
fi
lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
[ -n "$lib" ] && nccl_args+=(-DCOLLX_NCCL_LIBRARY="$lib")

step "configure and build in $BUILD"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${nccl_args[@]}" >>"$LOG" 2>&1 || { tail -30 "$LOG"; exit 1; }
fi
# Every gpu_* test and benchmark the build defines (the tier grows; naming them here went stale).
mapfile -t targets < <(ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\(gpu_[a-z0-9_]*\): .*/\1/p' | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "no gpu_* targets in $BUILD (CUDA not found at configure?)"; exit 1; }
targets+=(collx-example-mlp)  # example_mlp_gpu_*: the MLP example on device buffers (label gpu)
t0=$(date +%s)
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >>"$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
echo "   built in $(( $(date +%s) - t0 )) s"

# The real-device tier only ('^gpu$': not the gpu-emulated copies CI runs). It includes the
# parallel/ step on device buffers: gpu_parallel_dp_device_test and gpu_parallel_zero_device_test
# (dp reducer, ZeRO 0-3, offload, bf16/fp16 on the GPU against host-buffer runs) and
# gpu_parallel_device_test (tp/sp, cross-entropy, pipeline, norms), and example_mlp_gpu_*
# (examples/mlp --device: dp, ZeRO, tp, pp on device buffers against the host reference).
step "GPU tests (ctest -L '^gpu\$')"
ctest --test-dir "$BUILD" -L '^gpu$' --output-on-failure --timeout 300 >>"$LOG" 2>&1
tests_rc=$?
tests_line=$(grep -E "tests passed|tests failed" "$LOG" | tail -1)
echo "   $tests_line"
grep -E "^\s*[0-9]+ - gpu_.*(Failed|Skipped|Timeout)" "$LOG" | sed 's/^/   /'

val() { awk -v k="$1" '$1==k{print $2}' "$2"; }
bench() { echo "-- $*" >>"$LOG"; timeout 240 "$@" 2>>"$LOG" | tee -a "$LOG"; }

step "kernel and copy bandwidth (${KMIB} MiB buffers)"
bench "$BUILD/bench/gpu/gpu_kernel_bench" "$KMIB" 20 >"$BUILD/kernel.txt"
cat "$BUILD/kernel.txt" | sed 's/^/   /'

step "all-reduce of ranks sharing the GPU (${MIB} MiB)"
: >"$BUILD/allreduce.txt"
for spec in "2 ipc 20" "4 ipc 20" "2 staged 5"; do
  set -- $spec
  bench "$BUILD/bench/gpu/gpu_allreduce_bench" "$1" "$MIB" "$2" "$3" >>"$BUILD/allreduce.txt"
done
sed 's/^/   /' "$BUILD/allreduce.txt"

: >"$BUILD/nccl.txt"
if [ -x "$BUILD/bench/gpu/gpu_nccl_overhead_bench" ]; then
  step "call overhead over NCCL, one rank"
  bench "$BUILD/bench/gpu/gpu_nccl_overhead_bench" >"$BUILD/nccl.txt"
  sed 's/^/   /' "$BUILD/nccl.txt"
fi

# The table.
K=$BUILD/kernel.txt
copy=$(val d2d_copy_GBps "$K"); fp32=$(val reduce_fp32_GBps "$K"); bf16=$(val reduce_bf16_GBps "$K")
h2d=$(val pinned_h2d_GBps "$K"); d2h=$(val pinned_d2h_GBps "$K")
busbw() { awk -v np="$1" -v r="$2" '{for(i=1;i<=NF;i++){split($i,kv,"="); f[kv[1]]=kv[2]}} f["np"]==np && f["route"]==r {print f["busbw_GBps"]}' "$BUILD/allreduce.txt"; }
ipc2=$(busbw 2 ipc); ipc4=$(busbw 4 ipc); staged=$(busbw 2 staged)
over=$(val collx_overhead_us "$BUILD/nccl.txt"); raw=$(val nccl_raw_us "$BUILD/nccl.txt")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="" || b=="" || b+0==0) print "n/a"; else printf "%.0f%%", 100*a/b }'; }
# HBM bound of the IPC all-reduce: each rank reads its slice from every rank and writes it to
# every rank: 2*np*S bytes through HBM at the copy rate -> busbw bound = copy * (np-1) / np^2.
bound() { awk -v c="$copy" -v n="$1" 'BEGIN{ if (c=="") print ""; else printf "%.1f", c*(n-1)/(n*n) }'; }
b2=$(bound 2); b4=$(bound 4)
pin=$(awk -v a="$h2d" -v b="$d2h" 'BEGIN{ if (a==""||b=="") print ""; else printf "%.1f", (a<b?a:b) }')
echo
echo "collx GPU check: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), tests: ${tests_line:-none ran}"
printf '%-44s %12s %12s %8s %s\n' "figure" "measured" "reference" "ratio" "target"
printf '%-44s %12s %12s %8s %s\n' "reduce fp32 a+=b GB/s vs d2d copy" "${fp32:-n/a}" "${copy:-n/a}" "$(ratio "$fp32" "$copy")" ">= 90%"
printf '%-44s %12s %12s %8s %s\n' "reduce bf16 c=a+b GB/s vs d2d copy" "${bf16:-n/a}" "${copy:-n/a}" "$(ratio "$bf16" "$copy")" ">= 90%"
printf '%-44s %12s %12s %8s %s\n' "ipc all-reduce np=2 ${MIB}MiB busbw vs HBM bound" "${ipc2:-n/a}" "${b2:-n/a}" "$(ratio "$ipc2" "$b2")" ">= 70%"
printf '%-44s %12s %12s %8s %s\n' "ipc all-reduce np=4 ${MIB}MiB busbw vs HBM bound" "${ipc4:-n/a}" "${b4:-n/a}" "$(ratio "$ipc4" "$b4")" ">= 70%"
printf '%-44s %12s %12s %8s %s\n' "staged (tcp) np=2 busbw vs pinned copy GB/s" "${staged:-n/a}" "${pin:-n/a}" "$(ratio "$staged" "$pin")" "report"
printf '%-44s %12s %12s %8s %s\n' "collx-over-NCCL overhead us/call (raw us)" "${over:-n/a}" "${raw:-n/a}" "" "<= 1 us"
echo "(full log: $LOG)"
exit $tests_rc
