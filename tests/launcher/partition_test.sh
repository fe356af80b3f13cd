#!/bin/sh
# A silent network partition is reported by TCP keepalive / the transport's unacknowledged-data
# check (COLLX_TCP_UNACKED_TIMEOUT_MS; TCP_USER_TIMEOUT is off by default), not by the
# deadline. Two "hosts" (network namespaces joined by a veth pair), one rank each, all-reduce
# over TCP in a loop with COLLX_TIMEOUT_MS at 10 minutes; then one end of the link goes down
# (no FIN, no RST: packets just vanish). Every rank must fail with an error naming its peer
# as unreachable: within 15 s with short settings (keepalive 1 s + 1 s x 2 = 3 s, unacked
# window 3 s + 1 s check period = 4 s), and within 30 s with the default settings (keepalive
# 10 s + 5 s x 3 = 25 s, window 20 s + 1 s = 21 s); both while all-reduces keep data in flight
# (the unacknowledged-data check notices) and while a rank waits for a peer that sent nothing
# (keepalive notices). Prints the measured times.
# Usage: partition_test.sh PROGRAM (tests/launcher/launcher_allreduce). Exit 77 (skip) where
# namespaces cannot be made (not root, no iproute2, no CAP_SYS_ADMIN in a container).
set -u
. "$(dirname "$0")/test_lib.sh"
PROG=$1
clean_launch_env
begin_netns_test
make_netns_pair cxp$$ cxpart0 10.232.0

export COLLX_TIMEOUT_MS=600000 COLLX_TRANSPORTS=tcp COLLX_SOCKET_IFNAME=cxpart0 COLLX_WORLD_SIZE=2

# partition NAME LIMIT_S RANK1_PAUSE_MS RANKS: link up, both ranks all-reduce in a loop (rank 0
# every 50 ms, rank 1 every RANK1_PAUSE_MS), link down once both are running, then each rank
# of RANKS must report the failure within LIMIT_S seconds, naming its peer as unreachable.
# With rank 1 pausing for long, rank 0 waits in its all-reduce with nothing unacknowledged:
# only keepalive can notice (rank 1 sleeps through it and is killed afterwards).
partition() {
  name=$1
  limit=$2
  ip -n $B link set cxpart0 up || fail "link up in $B"
  rank=0
  for ns in $A $B; do
    pause=50
    [ $rank -eq 0 ] || pause=$3
    COLLX_RANK=$rank COLLX_STORE_ADDR=10.232.0.1:29531 ip netns exec $ns "$PROG" 20000 $pause \
      >"$dir/$name.out$rank" 2>"$dir/$name.err$rank" &
    eval "rank_pid$rank=$!"
    rank=$((rank + 1))
  done
  wait_for_lines "$dir/$name.out0" "sum 1 (expected 1)" 1 60 && wait_for_lines "$dir/$name.out1" "sum 1 (expected 1)" 1 60 ||
    { cat "$dir/$name".err*; fail "$name: the two ranks did not all-reduce across the namespaces"; }
  sleep 1  # rank 0 is in an all-reduce now (many in a row, or one waiting for rank 1)
  ip -n $B link set cxpart0 down
  cut=$(date +%s%N)
  for rank in $4; do
    peer=$((1 - rank))
    wait_for_lines "$dir/$name.err$rank" "collx_allreduce failed" 1 $((limit + 5)) ||
      { cat "$dir/$name".err*; fail "$name: rank $rank reported nothing within $((limit + 5)) s of the partition"; }
    ms=$((($(date +%s%N) - cut) / 1000000))
    echo "$name: rank $rank reported the partition after $ms ms: $(grep -m1 "collx_allreduce failed" "$dir/$name.err$rank")"
    how=keepalive
    grep -q "no ACK for" "$dir/$name.err$rank" && how="unacknowledged-data check"
    echo "$name: rank $rank: noticed by $how"
    [ "$ms" -le $((limit * 1000)) ] || fail "$name: rank $rank took $ms ms (limit $limit s)"
    grep -q "rank $peer is unreachable" "$dir/$name.err$rank" ||
      fail "$name: rank $rank's error does not say that rank $peer became unreachable (keepalive / unacked check)"
    eval "pid=\$rank_pid$rank"
    wait_for_exit "$pid" 30 || fail "$name: rank $rank still running 30 s after it reported the failure"
    wait "$pid"
    status=$?
    [ "$status" -eq 4 ] || fail "$name: rank $rank exited $status (expected 4: a collx call failed)"
  done
  kill_background
}

# In flight, keepalive 5 s leaves the noticing to the unacknowledged-data check (3 s + 1 s):
# with 1 s an idle sibling socket of the same peer would report it first.
export COLLX_TCP_KEEPALIVE_IDLE_S=5 COLLX_TCP_KEEPALIVE_INTERVAL_S=1 COLLX_TCP_KEEPALIVE_COUNT=2 COLLX_TCP_UNACKED_TIMEOUT_MS=3000
partition short-in-flight 15 50 "0 1"
export COLLX_TCP_KEEPALIVE_IDLE_S=1
partition short-idle 15 600000 0
unset COLLX_TCP_KEEPALIVE_IDLE_S COLLX_TCP_KEEPALIVE_INTERVAL_S COLLX_TCP_KEEPALIVE_COUNT COLLX_TCP_UNACKED_TIMEOUT_MS
partition defaults-in-flight 30 50 "0 1"
partition defaults-idle 30 600000 0
echo "PASS: partition"
