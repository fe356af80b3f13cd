#!/usr/bin/env bash
# CPU time per collective call, A/B/... alternating in one run: a load-tolerant companion of
# wall-clock busbw on a shared machine (other processes stretch the wall clock of a call, much
# less the CPU time it takes). For each repeat and each variant, runs collx-bench twice under
# `perf stat` (task-clock, page-faults, context-switches, summed over all ranks), with N1 and
# N2 timed iterations; the difference over (N2 - N1) * 2 calls (out of place and in place) is
# the cost of one call, setup and warm-up cancelled. Prints every command, then per variant
# the median over the repeats.
#
#   bench/cpu_ab.sh [--build DIR] [--repeat 3] [--n1 5] [--n2 25] [--np 2] [--size 16M]
#                   [--coll allreduce] -- 'LABEL=ENV1=V1,ENV2=V2[,--flag]' ...
#
# Example (huge pages off / on / zero-copy buffers):
#   bench/cpu_ab.sh --size 16M -- 'off=COLLX_SHM_HUGE_PAGES=0' 'on=COLLX_SHM_HUGE_PAGES=1' 'zc=--zero-copy'
set -u
script_dir=$(cd "$(dirname "$0")" && pwd)
build="$script_dir/../build" repeat=3 n1=5 n2=25 np=2 size=16M coll=allreduce
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --n1) n1=$2; shift 2 ;;
    --n2) n2=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --coll) coll=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "cpu_ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "cpu_ab.sh: give at least one variant after --" >&2; exit 2; }
command -v perf >/dev/null || { echo "cpu_ab.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
bench="$build/bench/collx-bench"
out=$(mktemp -d /tmp/collx-cpu-ab.XXXXXX)

# One run: prints "task_clock_ms page_faults context_switches busbw_out busbw_in".
run_one() {  # label spec iters
  local spec=$2 iters=$3 envs=() flags=() item
  IFS=',' read -ra items <<<"${spec#*=}"
  for item in "${items[@]}"; do
    case "$item" in --*) flags+=("$item") ;; ?*) envs+=("$item") ;; esac
  done
  local log="$out/${1}_${iters}_$RANDOM.log"
  local cmd=(env "${envs[@]}" perf stat -x, -e task-clock,page-faults,context-switches -o "$log.perf"
             "$bench" "$coll" --np "$np" -b "$size" -e "$size" -n "$iters" -w 3 -c 0 "${flags[@]}")
  echo "+ ${cmd[*]}" >&2
  "${cmd[@]}" >"$log" 2>&1 || { echo "  failed; see $log" >&2; tail -3 "$log" >&2; }
  awk -F, '/task-clock/ { t = $1 } /page-faults/ { p = $1 } /context-switches/ { c = $1 }
           END { printf "%s %s %s", t, p, c }' "$log.perf"
  awk '$1 ~ /^[0-9]+$/ && NF >= 13 { printf " %s %s", $8, $12 }' "$log"
  echo
}

declare -A rows
for r in $(seq 1 "$repeat"); do
  for spec in "$@"; do
    label=${spec%%=*}
    a=$(run_one "$label" "$spec" "$n1")
    b=$(run_one "$label" "$spec" "$n2")
    rows[$label]+="$a $b;"
  done
done

echo
echo "# $coll $size, $np ranks: per call (median of $repeat runs; differences of $n2 and $n1 timed iterations, out of place + in place)"
printf "# %-8s %14s %14s %12s %12s\n" variant "cpu us/call" "faults/call" "ctxsw/call" "busbw oop/ip (GB/s, wall)"
for spec in "$@"; do
  label=${spec%%=*}
  echo "${rows[$label]}" | tr ';' '\n' | awk -v label="$label" -v calls=$(( (n2 - n1) * 2 )) '
    NF >= 10 { n++; cpu[n] = ($6 - $1) * 1000 / calls; pf[n] = ($7 - $2) / calls; cs[n] = ($8 - $3) / calls; bo[n] = $9; bi[n] = $10 }
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { if (n) printf "  %-8s %14.1f %14.2f %12.2f %8s/%s\n", label, med(cpu, n), med(pf, n), med(cs, n), med(bo, n), med(bi, n) }'
done
echo "# logs in $out"
