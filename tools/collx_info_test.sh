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

exit $fail
