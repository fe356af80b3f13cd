#!/usr/bin/env bash
# Runs collx-bench and the Open MPI baseline (collx-mpi-bench) on the same sizes and prints,
# per size, collx busbw, MPI busbw and the ratio collx/MPI (out-of-place and in-place).
# Both run on their defaults for local ranks (collx: shared memory; Open MPI: its sm/vader
# BTL); --tcp puts both on TCP instead (collx -t tcp; Open MPI btl tcp,self, pml ob1).
# The same run also measures the memory-bandwidth bound (float32 a += b over 64 MiB arrays,
# `collx-bench --tune`) and prints collx's largest all-reduce busbw as a fraction of it.
#
#   bench/compare_mpi.sh [--build DIR] [--np "2 4"] [--colls "allreduce reducescatter allgather"]
#                        [-b 1M] [-e 64M] [-f 2] [-n 20] [-w 5] [-c 1] [-d float] [-o sum]
#                        [--tcp] [--collx-args "-a ring"] [--mpirun mpirun] [--out DIR]
#                        [--repeat K]
#
# With --repeat K each pair of runs is repeated K times, alternating collx and MPI, and the
# table shows the median busbw of each: on a shared 2-core machine single runs vary by +-30%.
# Every command is printed before it runs; the tables and JSON files stay in --out.
set -u

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

script_dir=$(cd "$(dirname "$0")" && pwd)
build="$script_dir/../build"
nps="2 4"
colls="allreduce"
minb=1M maxb=64M factor=2 iters=20 warmup=5 check=1 dtype=float op=sum
tcp=0
collx_args=""
mpirun=mpirun
out=""
repeat=1

while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --np) nps=${2//,/ }; shift 2 ;;
    --colls) colls=${2//,/ }; shift 2 ;;
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -c) check=$2; shift 2 ;;
    -d) dtype=$2; shift 2 ;;
    -o) op=$2; shift 2 ;;
    --tcp) tcp=1; shift ;;
    --mpi-shm) shift ;;  # the default now; kept so older command lines still work
    --collx-args) collx_args=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_mpi.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

for c in $colls; do
  case "$c" in allreduce|reducescatter|allgather) ;; *)
    echo "compare_mpi.sh: the MPI baseline has allreduce, reducescatter and allgather, not '$c'" >&2; exit 2 ;;
  esac
done
collx_bench="$build/bench/collx-bench"
mpi_bench="$build/bench/collx-mpi-bench"
for exe in "$collx_bench" "$mpi_bench"; do
  if [ ! -x "$exe" ]; then
    echo "compare_mpi.sh: $exe not found: build it (cmake --build $build --target collx-bench collx-mpi-bench) or pass --build" >&2
    exit 2
  fi
done
if ! command -v "$mpirun" >/dev/null 2>&1; then
  echo "compare_mpi.sh: $mpirun not found" >&2
  exit 2
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/collx-compare.XXXXXX)
mkdir -p "$out"
status=0

mpi_transport=()
mpi_label="Open MPI defaults (shared memory)"
collx_label="collx defaults (shared memory)"
if [ "$tcp" = 1 ]; then
  mpi_transport=(--mca btl "tcp,self" --mca pml ob1)
  mpi_label="Open MPI over TCP (btl tcp,self, pml ob1)"
  collx_label="collx over TCP (-t tcp)"
  collx_args="-t tcp $collx_args"
fi

# The memory-bandwidth bound, measured in this run: 1/gamma is the rate (GB/s of one input
# array) at which this host adds two float32 arrays that do not fit in any cache.
bound_log="$out/memory_bound.log"
echo "+ $collx_bench allreduce --np 2 --tune $out/bound.tune > $bound_log"
"$collx_bench" allreduce --np 2 --tune "$out/bound.tune" >"$bound_log" 2>&1 || {
  echo "  collx-bench --tune failed; see $bound_log"; status=1; }
bound_gbs=$(awk '/gamma/ && /ns\/byte/ { for (i = 1; i <= NF; ++i) if ($i == "gamma") { print 1 / $(i + 1); exit } }' "$bound_log")
sweep=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c "$check" -d "$dtype" -o "$op")
pairs=()
for np in $nps; do
  for coll in $colls; do
    cjs="" mjs=""
    for r in $(seq 1 "$repeat"); do
      cj="$out/collx_${coll}_np${np}_r${r}.json"
      mj="$out/mpi_${coll}_np${np}_r${r}.json"
      rm -f "$cj" "$mj"
      # shellcheck disable=SC2206  # --collx-args is split into words on purpose
      ccmd=("$collx_bench" "$coll" --np "$np" "${sweep[@]}" $collx_args --json "$cj")
      mcmd=("$mpirun" --allow-run-as-root --oversubscribe -np "$np" "${mpi_transport[@]}"
            "$mpi_bench" "$coll" "${sweep[@]}" --json "$mj")
      clog="$out/collx_${coll}_np${np}_r${r}.log" mlog="$out/mpi_${coll}_np${np}_r${r}.log"
      echo "+ ${ccmd[*]} > $clog"
      "${ccmd[@]}" >"$clog" 2>&1 || {
        echo "  collx-bench failed (exit $?); see $clog:"; tail -5 "$clog" | sed 's/^/  | /'; status=1; }
      echo "+ ${mcmd[*]} > $mlog"
      "${mcmd[@]}" >"$mlog" 2>&1 || {
        echo "  collx-mpi-bench failed (exit $?); see $mlog:"; tail -5 "$mlog" | sed 's/^/  | /'; status=1; }
      cjs="$cjs${cjs:+,}$cj" mjs="$mjs${mjs:+,}$mj"
    done
    pairs+=("$coll" "$np" "$cjs" "$mjs")
  done
done

echo
echo "# collx: $collx_label${collx_args:+ ($collx_args)}   MPI: $mpi_label"
echo "# memory-bandwidth bound (float32 a += b, 64 MiB arrays): ${bound_gbs:-?} GB/s"
python3 - "${bound_gbs:-0}" "${pairs[@]}" <<'PY'
import json
import sys

def load_one(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

def load(paths):
    """The runs of one pair merged: per size, the median busbw of each column."""
    runs = [d for d in (load_one(p) for p in paths.split(",")) if d is not None]
    if not runs:
        return None
    merged = dict(runs[0])
    rows = []
    for row in runs[0].get("results", []):
        key = (row["size"], row["type"], row["redop"])
        same = [r for d in runs for r in d.get("results", []) if (r["size"], r["type"], r["redop"]) == key]
        out = dict(row)
        for col in ("out_of_place", "in_place"):
            cells = [r.get(col) for r in same if isinstance(r.get(col), dict)]
            if cells:
                out[col] = dict(cells[0], busbw=median(c.get("busbw") for c in cells))
        rows.append(out)
    merged["results"] = rows
    merged["avg_busbw"] = median(d.get("avg_busbw") for d in runs)
    merged["errors"] = [e for d in runs for e in d.get("errors", [])]
    merged["wrong_total"] = sum(d.get("wrong_total") or 0 for d in runs)
    merged["runs"] = len(runs)
    return merged

def bw(cell):
    return cell.get("busbw") if isinstance(cell, dict) else None

def ratio(a, b):
    return "%8.2f" % (a / b) if a is not None and b else "%8s" % "-"

def num(v):
    return "%10.3f" % v if v is not None else "%10s" % "-"

bound = float(sys.argv[1])
args = sys.argv[2:]
for i in range(0, len(args), 4):
    coll, np, cpath, mpath = args[i:i + 4]
    c, m = load(cpath), load(mpath)
    print()
    if c is None or m is None:
        missing = [p for p, d in ((cpath, c), (mpath, m)) if d is None]
        print("# %s np=%s: no results (%s)" % (coll, np, ", ".join(missing)))
        continue
    print("# %s np=%s   busbw in GB/s (median of %d runs)   collx %s, MPI %s" % (
        coll, np, min(c["runs"], m["runs"]), c.get("library_version", "?"), m.get("library_version", "?")))
    print("# %12s  %12s  %10s  %10s  %8s  %10s  %10s  %8s  %s" % (
        "size (B)", "count", "collx oop", "MPI oop", "ratio", "collx ip", "MPI ip", "ratio", "collx algorithm"))
    mpi_rows = {(r["size"], r["type"], r["redop"]): r for r in m.get("results", [])}
    for r in c.get("results", []):
        mr = mpi_rows.get((r["size"], r["type"], r["redop"]))
        co, ci = bw(r.get("out_of_place")), bw(r.get("in_place"))
        mo = bw(mr.get("out_of_place")) if mr else None
        mi = bw(mr.get("in_place")) if mr else None
        print("  %12d  %12d  %s  %s  %s  %s  %s  %s  %s" % (
            r["size"], r["count"], num(co), num(mo), ratio(co, mo), num(ci), num(mi), ratio(ci, mi),
            r.get("algorithm", "?")))
    if c.get("results") and coll == "allreduce" and bound > 0:
        last = c["results"][-1]
        big = bw(last.get("out_of_place"))
        if big is not None:
            print("# collx busbw at %d B = %.1f%% of the memory-bandwidth bound (%.2f GB/s)" % (
                last["size"], 100.0 * big / bound, bound))
    if c.get("results") and m.get("results"):
        ca, ma = c.get("avg_busbw"), m.get("avg_busbw")
        print("# avg busbw: collx %s  MPI %s  ratio %s" % (num(ca).strip(), num(ma).strip(), ratio(ca, ma).strip()))
    for name, d in (("collx", c), ("MPI", m)):
        for e in d.get("errors", []):
            print("# %s error: %s" % (name, e))
        if d.get("wrong_total"):
            print("# WARNING: %s reported %d wrong elements" % (name, d["wrong_total"]))
PY
echo
echo "# logs and JSON in $out"
exit $status
