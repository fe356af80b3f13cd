#!/bin/sh
# Multi-host over network namespaces: two "hosts" (namespaces joined by a veth pair), one
# collx-run per host, 2 ranks each, all-reducing over TCP. Then the link is cut mid-run and
# every host's job must end with an error in time (COLLX_TIMEOUT_MS is 3 s, the agents'
# heartbeat timeout 3 s). Usage: netns_test.sh COLLX_RUN PROGRAM. Exit 77 (skip) where
# namespaces cannot be made (not root, no iproute2, no CAP_SYS_ADMIN in a container).
set -u
. "$(dirname "$0")/test_lib.sh"
RUN=$1
PROG=$2
clean_launch_env
begin_netns_test
make_netns_pair cx$$ cxeth0 10.231.0

# Every rank loops: all-reduce, 50 ms pause, for up to ~10 minutes (the link cut ends it).
export COLLX_TIMEOUT_MS=3000 COLLX_TRANSPORTS=tcp COLLX_SOCKET_IFNAME=cxeth0
node=0
for ns in $A $B; do
  ip netns exec $ns timeout 100 "$RUN" --nnodes 2 --node-rank $node --nproc-per-node 2 \
    --rdzv-endpoint 10.231.0.1:29517 --rdzv-timeout 30 --heartbeat-timeout 3 --stop-grace 1 \
    -- "$PROG" 12000 50 >"$dir/out$node" 2>"$dir/err$node" &
  eval "agent$node=$!"
  node=$((node + 1))
done
wait_for_lines "$dir/out0" "sum 6 (expected 6)" 2 60 && wait_for_lines "$dir/out1" "sum 6 (expected 6)" 2 60 ||
  { cat "$dir"/err*; fail "the 4 ranks did not all-reduce across the two hosts"; }
echo "all-reduce across hosts: ok; cutting the link"
cat "$dir/out0" "$dir/out1"

ip -n $B link set cxeth0 down
cut=$(date +%s)
for node in 0 1; do
  eval "pid=\$agent$node"
  wait_for_exit "$pid" 30 || fail "host $node still running 30 s after the link was cut"
  wait "$pid"
  status=$?
  echo "host $node: collx-run exited $status after $(($(date +%s) - cut)) s"
  sed 's/^/  /' "$dir/err$node"
  [ "$status" -ne 0 ] || fail "host $node exited 0 although its peers became unreachable"
  # At least the first rank to notice says why; the agent stops its other rank.
  grep -q "failed" "$dir/err$node" || fail "no rank or agent of host $node reported the failure"
done
echo "PASS: netns"
