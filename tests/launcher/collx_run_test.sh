#!/bin/sh
# collx-run end to end on this machine. Usage: collx_run_test.sh CASE COLLX_RUN PROGRAM
#   PROGRAM is launcher_allreduce (all-reduces its rank and prints the sum).
set -u
. "$(dirname "$0")/test_lib.sh"
case_name=$1
RUN=$2
PROG=$3
begin_test

case $case_name in
standalone)
  timeout 60 "$RUN" --standalone --nproc-per-node 3 "$PROG" >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "exit $?"; }
  expect_sums "$dir/out" 3
  # Each line carries its rank's prefix.
  for r in 0 1 2; do grep -q "^\[$r\] rank $r of 3:" "$dir/out" || fail "no [${r}] prefix"; done
  ;;

job_token)
  # Without COLLX_JOB_TOKEN a standalone job gets one (32 hex digits), the same in every rank,
  # and its ranks authenticate with it; a token the user set is passed through unchanged.
  (unset COLLX_JOB_TOKEN
   timeout 60 "$RUN" --standalone --nproc-per-node 3 -- \
     sh -c 'printf "%s\n" "$COLLX_JOB_TOKEN" >"$1/token.$RANK"; exec "$0"' "$PROG" "$dir" \
     >"$dir/out" 2>"$dir/err") || { cat "$dir/err"; fail "exit $?"; }
  expect_sums "$dir/out" 3
  token=$(cat "$dir/token.0")
  echo "$token" | grep -Eq '^[0-9a-f]{32}$' || fail "rank 0 got no generated token: '$token'"
  for r in 1 2; do [ "$(cat "$dir/token.$r")" = "$token" ] || fail "rank $r has another token"; done
  COLLX_JOB_TOKEN=user-secret-of-the-job timeout 60 "$RUN" --standalone --nproc-per-node 2 -- \
    sh -c 'printf "%s\n" "$COLLX_JOB_TOKEN" >"$1/token.$RANK"; exec "$0"' "$PROG" "$dir" \
    >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "exit $? with a user token"; }
  expect_sums "$dir/out" 2
  [ "$(cat "$dir/token.1")" = user-secret-of-the-job ] || fail "the user's token was not passed through"
  ;;

two_nodes)
  port=$(free_port)
  pids=
  for node in 0 1; do
    timeout 60 "$RUN" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:$port --rdzv-id t2 \
      "$PROG" >"$dir/out$node" 2>"$dir/err$node" &
    pids="$pids $!"
  done
  for pid in $pids; do wait "$pid" || { cat "$dir"/err*; fail "an agent exited $?"; }; done
  cat "$dir/out0" "$dir/out1" >"$dir/out"
  expect_sums "$dir/out" 4
  [ "$(grep -c 'rank' "$dir/out0")" -eq 2 ] || fail "node 0 did not run 2 ranks"
  ;;

two_nodes_fail)
  # Rank 3 (node 1) exits 3 while the others sleep: both agents stop their ranks and exit 3.
  # Then the same job with --max-restarts 1 succeeds on attempt 1 on both nodes.
  start=$(date +%s)
  for restarts in 0 1; do
    port=$(free_port)
    pids=
    for node in 0 1; do
      timeout 60 "$RUN" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:$port --max-restarts $restarts -- \
        sh -c 'if [ "$RANK" = 3 ] && [ "$COLLX_RESTART_COUNT" = 0 ]; then sleep 0.5; exit 3; fi
               [ "$COLLX_RESTART_COUNT" = 0 ] && exec sleep 30; exec "$0"' "$PROG" \
        >"$dir/out$node" 2>"$dir/err$node" &
      pids="$pids $!"
    done
    for pid in $pids; do
      wait "$pid"
      status=$?
      if [ $restarts = 0 ]; then
        [ $status -eq 3 ] || { cat "$dir"/err*; fail "an agent exited $status, expected rank 3's status 3"; }
      else
        [ $status -eq 0 ] || { cat "$dir"/err*; fail "restarted job: an agent exited $status"; }
      fi
    done
  done
  cat "$dir/out0" "$dir/out1" >"$dir/out"
  expect_sums "$dir/out" 4
  grep -q "restart 1" "$dir/out" || fail "the second job did not run attempt 1"
  [ $(($(date +%s) - start)) -lt 25 ] || fail "the sleeping ranks were not stopped"
  ;;

elastic)
  # --nnodes 1:2 with one agent: after the last call (2 s) the job runs on the one node.
  port=$(free_port)
  timeout 60 "$RUN" --nnodes 1:2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:$port "$PROG" \
    >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "exit $?"; }
  expect_sums "$dir/out" 2
  ;;

rdzv_timeout)
  # A second agent that never comes: the rendezvous ends at --rdzv-timeout with a message.
  port=$(free_port)
  timeout 30 "$RUN" --nnodes 2 --rdzv-endpoint 127.0.0.1:$port --rdzv-timeout 2 true 2>"$dir/err"
  status=$?
  [ $status -eq 1 ] || fail "lone agent exited $status, expected 1 at its rendezvous timeout"
  grep -q "fewer than 2 agents joined within --rdzv-timeout" "$dir/err" || { cat "$dir/err"; fail "no reason given"; }
  ;;

output)
  # stdout and stderr keep their streams; a last line without newline still gets out; lines
  # of concurrent ranks never mix (each rank writes 2000 lines of 300 characters).
  timeout 60 "$RUN" --nproc-per-node 3 -- sh -c '
    echo "out-$RANK"; echo "err-$RANK" >&2
    line=$(printf "%0300d" 0 | tr 0 x); i=0
    while [ $i -lt 2000 ]; do echo "$RANK-$line"; i=$((i + 1)); done
    printf "partial-$RANK"' >"$dir/out" 2>"$dir/err" || fail "exit $?"
  for r in 0 1 2; do
    grep -qx "\[$r\] out-$r" "$dir/out" || fail "stdout of rank $r lost its prefix"
    grep -qx "\[$r\] err-$r" "$dir/err" || fail "stderr of rank $r lost its prefix"
    grep -qx "\[$r\] partial-$r" "$dir/out" || fail "unterminated last line of rank $r lost"
    [ "$(grep -cx "\[$r\] $r-x\{300\}" "$dir/out")" -eq 2000 ] || fail "lines of rank $r were split or mixed"
  done
  ;;

rank_fails)
  # Rank 1 exits 3 while the others sleep: all are stopped and collx-run exits 3.
  start=$(date +%s)
  timeout 40 "$RUN" --nproc-per-node 3 -- sh -c 'echo started; if [ "$RANK" = 1 ]; then sleep 0.5; exit 3; fi; sleep 30' \
    >"$dir/out" 2>"$dir/err"
  status=$?
  [ $status -eq 3 ] || { cat "$dir/err"; fail "collx-run exited $status, expected the rank's 3"; }
  [ $(($(date +%s) - start)) -lt 20 ] || fail "the sleeping ranks were not stopped"
  grep -q "rank 1 exited with status 3" "$dir/err" || fail "no message naming rank 1"
  ;;

restart)
  # Attempt 0: rank 0 fails; attempt 1 succeeds, and the program saw the restart count.
  timeout 60 "$RUN" --nproc-per-node 2 --max-restarts 2 -- sh -c \
    'echo "attempt $COLLX_RESTART_COUNT/$TORCHELASTIC_RESTART_COUNT"
     if [ "$COLLX_RESTART_COUNT" = 0 ] && [ "$RANK" = 0 ]; then exit 5; fi; exec "$0"' "$PROG" \
    >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "exit $?"; }
  grep -q "^\[1\] attempt 1/1" "$dir/out" || fail "restart count not visible"
  grep -q "rank 0 of 2: sum 1 (expected 1) restart 1" "$dir/out" || fail "attempt 1 did not all-reduce"
  # Restarts exhausted: the failing rank's status comes out.
  timeout 60 "$RUN" --nproc-per-node 2 --max-restarts 1 -- sh -c 'echo "attempt $COLLX_RESTART_COUNT"; sleep 0.3; exit 5' \
    >"$dir/out2" 2>"$dir/err2"
  status=$?
  [ $status -eq 5 ] || fail "exhausted restarts: exit $status, expected 5"
  [ "$(grep -c 'attempt 1' "$dir/out2")" -eq 2 ] || fail "attempt 1 did not run"
  ! grep -q 'attempt 2' "$dir/out2" || fail "ran more attempts than --max-restarts 1 allows"
  ;;

sigterm)
  # SIGTERM reaches every rank (each traps it and says so); collx-run exits 128 + 15.
  timeout 60 "$RUN" --nproc-per-node 3 --max-restarts 3 -- sh -c \
    'trap "echo got-term; exit 0" TERM; echo ready; while :; do sleep 0.1; done' >"$dir/out" 2>"$dir/err" &
  agent=$!
  wait_for_lines "$dir/out" ready 3 30 || fail "ranks did not start"
  kill -TERM $agent
  wait_for_exit $agent 20 || fail "collx-run still running 20 s after SIGTERM"
  wait $agent
  status=$?
  [ $status -eq 143 ] || fail "exit $status after SIGTERM, expected 143"
  for r in 0 1 2; do grep -qx "\[$r\] got-term" "$dir/out" || fail "rank $r did not get SIGTERM"; done
  ! grep -q "restarting" "$dir/err" || fail "a signalled job must not restart"
  ;;

agent_killed)
  # Kill one of two agents with SIGKILL: the survivor ends with an error well before its
  # 120 s rendezvous timeout (by the 2 s heartbeat timeout, or at once when the store went).
  for victim in 1 0; do
    port=$(free_port)
    for node in 0 1; do
      "$RUN" --nnodes 2 --node-rank $node --nproc-per-node 1 --rdzv-endpoint 127.0.0.1:$port \
        --rdzv-timeout 120 --heartbeat-timeout 2 -- sh -c 'echo ready; sleep 60' >"$dir/out$node" 2>"$dir/err$node" &
      eval "agent$node=$!"
    done
    wait_for_lines "$dir/out0" ready 1 30 && wait_for_lines "$dir/out1" ready 1 30 || fail "ranks did not start"
    eval "kill -KILL \$agent$victim"
    survivor=$((1 - victim))
    eval "pid=\$agent$survivor"
    wait_for_exit "$pid" 30 || fail "agent $survivor still running 30 s after agent $victim died"
    wait "$pid"
    status=$?
    [ $status -ne 0 ] || fail "agent $survivor exited 0 after agent $victim died"
    cat "$dir/err$survivor" >&2
    grep -q "heartbeat\|store" "$dir/err$survivor" || fail "agent $survivor did not say why it stopped"
    wait 2>/dev/null
  done
  ;;

*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
