#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR CONSUMER_SRC CMAKE LIBDIR CC CXX
#
# Proves the installed tree is usable by someone who has only the tree: install into a
# temporary prefix (never the system), build an outside project against it both ways users
# do (find_package and pkg-config), and run each binary as a real 2-rank job.
set -euo pipefail
build=$1 src=$2 cmake=$3 libdir=$4 cc=$5 cxx=$6

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collx-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "== $*"; }

step "install to $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }

step "find_package(collx) build"
# Fresh configure each run: a stale cache could find an older install.
"$cmake" -S "$src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" \
  || { cat "$tmp/cfg.log"; exit 1; }
"$cmake" --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }

step "pkg-config build"
if ! command -v pkg-config >/dev/null; then
  echo "FAIL: pkg-config not found; it is a required build dependency (tools/install-deps.sh installs it)" >&2
  exit 1
fi
# Only the temp prefix may satisfy the lookup, not a collx installed on the system.
export PKG_CONFIG_LIBDIR="$prefix/$libdir/pkgconfig"
unset PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs collx)
echo "pkg-config --cflags --libs collx: $flags"
# shellcheck disable=SC2086  # the flags are meant to split into words
"$cc" -std=c99 -Wall -Wextra -Werror "$src/consumer.c" -o "$tmp/consumer_pc" $flags

# Runs BINARY as ranks 0 and 1 of a world on a fresh loopback port; both must exit 0.
run_two_ranks() {
  local bin=$1 port pids=() rc=0
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  step "run $(basename "$bin") on 2 ranks, store 127.0.0.1:$port"
  for rank in 0 1; do
    COLLX_RANK=$rank COLLX_WORLD_SIZE=2 COLLX_STORE_ADDR=127.0.0.1:$port \
      LD_LIBRARY_PATH="$prefix/$libdir" timeout 60 "$bin" &
    pids+=($!)
  done
  for i in 0 1; do
    local status=0
    wait "${pids[$i]}" || status=$?
    if [ "$status" -ne 0 ]; then
      echo "FAIL: $(basename "$bin") rank $i exited $status (124 = killed by timeout)" >&2
      rc=1
    fi
  done
  return $rc
}

failed=0
run_two_ranks "$tmp/cmake-build/consumer" || failed=1
run_two_ranks "$tmp/cmake-build/consumer_static" || failed=1
run_two_ranks "$tmp/consumer_pc" || failed=1
# The shared builds must really have loaded the installed library, not a build-tree copy.
# Capture first: `ldd | grep -q` under pipefail fails at random when grep exits early and
# ldd dies of SIGPIPE.
resolved=$(LD_LIBRARY_PATH="$prefix/$libdir" ldd "$tmp/consumer_pc")
grep -q "$prefix/$libdir/libcollx.so" <<<"$resolved" \
  || { echo "FAIL: consumer_pc does not resolve libcollx.so from $prefix: $resolved" >&2; failed=1; }
exit $failed
