#!/bin/sh
# The library joins jobs that other launchers start. Usage: launcher_env_test.sh KIND PROGRAM
#   KIND: torchrun | slurm | openmpi (a real mpirun). Three ranks all-reduce their ranks and
#   each must print the right sum.
set -u
. "$(dirname "$0")/test_lib.sh"
kind=$1
PROG=$2
begin_test
port=$(free_port)

# start_ranks VARIABLES...: one background rank per value of R (0..2), with the given
# variables ("NAME=VALUE", where VALUE may use $r).
start_ranks() {
  pids=
  for r in 0 1 2; do
    (eval "export $*"; exec timeout 60 "$PROG") >"$dir/out$r" 2>"$dir/err$r" &
    pids="$pids $!"
  done
  for pid in $pids; do wait "$pid" || { cat "$dir"/err*; fail "a $kind rank exited $?"; }; done
  cat "$dir"/out? >"$dir/out"
}

case $kind in
torchrun)
  # torchrun's names; collx's store takes MASTER_PORT + 1 (rank 0 hosts it). The port found
  # free is the store's: MASTER_PORT + 1 could be another test's listener, which rank 0
  # would then join as "the store already there".
  start_ranks 'RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1' "MASTER_PORT=$((port - 1))"
  ;;
slurm)
  # srun gives ranks but no store: the job script names one (COLLX_STORE_ADDR).
  start_ranks 'SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_LOCALID=$r SLURM_JOB_ID=42' "COLLX_STORE_ADDR=127.0.0.1:$port"
  ;;
openmpi)
  command -v mpirun >/dev/null || { echo "SKIP: mpirun (Open MPI) is not installed"; exit 77; }
  timeout 60 mpirun --allow-run-as-root --oversubscribe -np 3 -x COLLX_STORE_ADDR=127.0.0.1:$port \
    -x COLLX_TIMEOUT_MS "$PROG" >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "mpirun exited $?"; }
  ;;
*) fail "unknown launcher kind $kind" ;;
esac
expect_sums "$dir/out" 3
echo "PASS: $kind"
