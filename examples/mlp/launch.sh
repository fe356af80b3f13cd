#!/usr/bin/env bash
# launch.sh NPROC PROGRAM [ARGS...]: start NPROC ranks of PROGRAM on this host the way a
# launcher (torchrun, collx-run) would: COLLX_RANK, COLLX_WORLD_SIZE, COLLX_LOCAL_RANK,
# COLLX_LOCAL_WORLD_SIZE and COLLX_STORE_ADDR on a free loopback port. Every rank must exit
# 0; the first failure kills the others. Ends within LAUNCH_TIMEOUT seconds (default 120).
set -u
nproc=$1
shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
for ((rank = 0; rank < nproc; rank++)); do
  COLLX_RANK=$rank COLLX_WORLD_SIZE=$nproc COLLX_LOCAL_RANK=$rank COLLX_LOCAL_WORLD_SIZE=$nproc \
    COLLX_STORE_ADDR=127.0.0.1:$port timeout "${LAUNCH_TIMEOUT:-120}" "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
  if ! wait "$pid"; then
    rc=1
    kill "${pids[@]}" 2>/dev/null
  fi
done
exit $rc
