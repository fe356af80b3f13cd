#!/bin/sh
# collx_info_test: runs collx-info and checks its report. Usage: collx_info_test.sh COLLX_INFO SOURCE_DIR
set -u
info="$1"
src="$2"
fail=0
check() {  # check DESCRIPTION COMMAND...
  what="$1"; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

unset COLLX_ALGO COLLX_TRANSPORTS COLLX_TIMEOUT_MS
"$info" >"$out" 2>&1
check "exit 0" test $? -eq 0
check "version line" grep -Eq '^collx library [0-9]+\.[0-9]+\.[0-9]+ \(header [0-9]+\.[0-9]+\.[0-9]+\)$' "$out"
check "tcp usable" grep -Eq '^  tcp +usable$' "$out"
check "features listed" grep -Eq '^  openssl +(found|not found)' "$out"
check "setting with its meaning" grep -q 'Default deadline of every blocking call in milliseconds' "$out"
check "setting with its default" grep -Eq 'default 600000, current .600000. \(default\)' "$out"
check "default allreduce choice" grep -Eq '^  allreduce +2  recursive_doubling' "$out"

COLLX_TIMEOUT_MS=1234 "$info" settings >"$out" 2>&1
check "settings: environment value" grep -Eq "current '1234' \(environment\)" "$out"

# The job token is a secret: no report shows it, only that it is set.
secret=collx-info-must-not-print-this-token
for args in "" settings --json; do
  COLLX_JOB_TOKEN=$secret "$info" $args >"$out" 2>&1
  check "job token not printed (collx-info $args)" sh -c '! grep -q "$0" "$1"' "$secret" "$out"
  check "job token shown as hidden (collx-info $args)" grep -q '(hidden, 36 bytes)' "$out"
done

COLLX_ALGO='allreduce:ring' "$info" algorithms >"$out" 2>&1
check "COLLX_ALGO=allreduce:ring exit 0" test $? -eq 0
check "ring for allreduce at 8 B" grep -Eq '^  allreduce +2  ring ' "$out"

COLLX_ALGO='allreduce:no_such_algo' "$info" algorithms >"$out" 2>&1
check "bad COLLX_ALGO exits 1" test $? -eq 1
check "bad COLLX_ALGO names the rule" grep -q "COLLX_ALGO rule 'allreduce:no_such_algo'" "$out"
COLLX_ALGO='allreduce:no_such_algo' "$info" >/dev/null 2>&1
check "bad COLLX_ALGO exits 1 (full report)" test $? -eq 1

"$info" --json >"$out" 2>&1
check "--json exit 0" test $? -eq 0
if command -v python3 >/dev/null 2>&1; then
  check "--json is valid JSON" python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["settings"] and d["algorithms"]' <"$out"
fi

"$info" --no-such-flag >/dev/null 2>&1
check "bad flag exits 2" test $? -eq 2

"$info" --settings-markdown >"$out" 2>&1
check "--settings-markdown equals docs/environment.md" cmp -s "$out" "$src/docs/environment.md"

"$info" --algorithms-markdown >"$out" 2>&1
check "--algorithms-markdown equals docs/algorithms.md" cmp -s "$out" "$src/docs/algorithms.md"
"$info" algorithms >"$out" 2>&1
check "algorithms lists the registry" grep -Eq '^  binomial +broadcast, reduce: ' "$out"

# Topology (hwloc): a tree, JSON and Graphviz, of this machine and of the test XML.
xml="$src/lib/topo/testdata/two_sockets_gpus_nics.xml"
if "$info" | grep -Eq '^  hwloc +found'; then
  "$info" topo >"$out" 2>&1
  check "topo exit 0" test $? -eq 0
  check "topo tree names the host and a NUMA node" grep -Eq '^host .*NUMA nodes [1-9]' "$out"
  check "topo tree lists PUs" grep -Eq '^      core 0: PUs ' "$out"
  "$info" topo --xml "$xml" >"$out" 2>&1
  check "topo --xml: GPU on NUMA 3" grep -q 'gpu 1: cuda1 Test GPU A, PCI 0000:ca:00.0, NUMA 3' "$out"
  check "topo --xml: NIC speed and node" grep -q 'ib0 / mlx5_0: 200 Gb/s, PCI 0000:31:00.0, NUMA 1' "$out"
  "$info" topo --json --xml "$xml" >"$out" 2>&1
  check "topo --json exit 0" test $? -eq 0
  if command -v python3 >/dev/null 2>&1; then
    check "topo --json is valid JSON with the devices" python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["gpus"]) == 2 and d["nics"][1]["name"] == "eth2" and d["nics"][1]["numa"] == 2' <"$out"
  fi
  "$info" topo --dot --synthetic 'pack:2 numa:2 core:2 pu:1' >"$out" 2>&1
  check "topo --dot draws a graph" grep -q '^graph topology {' "$out"
  check "topo --dot: NUMA 3 in package 1" grep -q 'package1 -- numa3;' "$out"
  "$info" topo --synthetic 'pack:nonsense' >"$out" 2>&1
  check "topo with a bad description exits 1" test $? -eq 1
  check "topo error names the description" grep -q 'synthetic:pack:nonsense' "$out"
else
  "$info" topo >"$out" 2>&1
  check "topo without hwloc exits 1" test $? -eq 1
  check "topo without hwloc says so" grep -q 'built without hwloc' "$out"
fi
"$info" topo --svg >/dev/null 2>&1
check "topo bad flag exits 2" test $? -eq 2

# collx-info hang: synthetic flight-record dumps of 4 ranks (the layout lib/core/flight_recorder.cc
# writes). Ranks 0, 1 and 3 are in all-reduce #12; rank 2 finished broadcast #11 and sends to 3.
fr=$(mktemp -d)
trap 'rm -f "$out"; rm -rf "$fr"' EXIT
dump() {  # dump RANK DUMPED_NS RECORD_LINES
  printf '{"collx_flight_record": 1, "host": "h%s", "pid": 10%s, "rank": %s, "dumped_ns": %s, "dumped_wall_us": 0, "communicators": [\n' "$1" "$1" "$1" "$2"
  printf '{"name": "world", "rank": %s, "size": 4, "transport": "tcp", "records": [\n%s\n]}\n]}\n' "$1" "$3"
}
rec() {  # rec ID SEQ KIND STATE STATUS START END PEER
  printf '  {"id": %s, "seq": %s, "kind": "%s", "count": 1024, "datatype": "float32", "op": "sum", "root": -1, "peer": %s, "algorithm": "ring", "state": "%s", "status": "%s", "enqueue_ns": %s, "start_ns": %s, "end_ns": %s, "enqueue_wall_us": 0}' \
    "$1" "$2" "$3" "$8" "$4" "$5" "$6" "$6" "$7"
}
done11=$(rec 11 11 broadcast completed COLLX_OK 1000000000 1100000000 -1)
for r in 0 1 3; do
  dump $r 14300000000 "$done11,
$(rec 12 12 allreduce running COLLX_OK 2000000000 0 -1)" >"$fr/rank$r.json"
done
dump 2 14300000000 "$done11,
$(rec 12 0 send running COLLX_OK 2000000000 0 3)" >"$fr/rank2.json"
"$info" hang "$fr" >"$out" 2>&1
check "hang exit 0" test $? -eq 0
check "hang names the stuck collective and who is in it" \
  grep -q "^allreduce #12 (count 1024, float32, ring) on 'world': in it: ranks 0,1,3 (waiting since 12.3 s); not in it: rank 2 (last completed broadcast #11, now in send to 3 for 12.3 s)$" "$out"
rm "$fr/rank1.json"
"$info" hang "$fr" >"$out" 2>&1
check "hang: a missing dump is named" grep -q "not in it: rank 1 (no dump), rank 2" "$out"
"$info" hang /nonexistent-collx-dir >"$out" 2>&1
check "hang without dumps exits 2" test $? -eq 2

exit $fail
