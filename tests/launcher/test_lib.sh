# Helpers shared by the launcher tests (sourced). Every wait here is bounded.

fail() { echo "FAIL: $*" >&2; exit 1; }

# A TCP port nobody listens on right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + $$ % 30000))
}

# wait_for_lines FILE PATTERN COUNT SECONDS: until FILE has COUNT lines matching PATTERN.
wait_for_lines() {
  _tries=$(($4 * 10))
  while [ "$(cat "$1" 2>/dev/null | grep -c -- "$2")" -lt "$3" ]; do
    _tries=$((_tries - 1))
    [ "$_tries" -gt 0 ] || return 1
    sleep 0.1
  done
}

# wait_for_exit PID SECONDS: 0 once PID has exited (reaped by `wait` afterwards).
wait_for_exit() {
  _tries=$(($2 * 10))
  while kill -0 "$1" 2>/dev/null; do
    _tries=$((_tries - 1))
    [ "$_tries" -gt 0 ] || return 1
    sleep 0.1
  done
}

# expect_sums FILE WORLD: every rank 0..WORLD-1 printed the right all-reduce result.
expect_sums() {
  _sum=$(($2 * ($2 - 1) / 2))
  _r=0
  while [ "$_r" -lt "$2" ]; do
    grep -q "rank $_r of $2: sum $_sum (expected $_sum)" "$1" || { cat "$1" >&2; fail "rank $_r of $2 did not print sum $_sum"; }
    _r=$((_r + 1))
  done
}

# Launcher variables of the environment the test runs in must not leak into the ranks.
clean_launch_env() {
  for v in COLLX_RANK COLLX_WORLD_SIZE COLLX_LOCAL_RANK COLLX_LOCAL_WORLD_SIZE COLLX_STORE_ADDR \
           RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT \
           SLURM_PROCID SLURM_NTASKS SLURM_LOCALID; do
    unset "$v"
  done
}

# Kills the background jobs still running (dash's `jobs -p` works only outside $(...)).
kill_background() {
  jobs -p >"${TMPDIR:-/tmp}/collx_jobs.$$" 2>/dev/null
  for _pid in $(cat "${TMPDIR:-/tmp}/collx_jobs.$$"); do kill -KILL "$_pid" 2>/dev/null; done
  rm -f "${TMPDIR:-/tmp}/collx_jobs.$$"
}

# The common start of a test: a clean launcher environment, a generous collx timeout (an
# upper bound only), and $dir, removed with any leftover background job on exit.
begin_test() {
  clean_launch_env
  export COLLX_TIMEOUT_MS=20000
  dir=$(mktemp -d)
  trap 'kill_background; rm -rf "$dir"' EXIT
}

# Two "hosts" for multi-host tests: network namespaces $A and $B (named after $1) joined by a
# veth pair whose ends are both called $2, addressed $3.1 and $3.2 (/24), with lo and the
# veth up. Needs $dir. Exits 77 (skip) with the reason where namespaces cannot be made (not
# root, no iproute2, no CAP_SYS_ADMIN in a container). remove_netns_pair undoes it.
make_netns_pair() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
  command -v ip >/dev/null ||
    { echo "SKIP: ip (iproute2) is not installed; tools/install-deps.sh installs it"; exit 77; }
  A=${1}a
  B=${1}b
  ip netns add "$A" 2>"$dir/why" || { echo "SKIP: cannot create a network namespace: $(cat "$dir/why")"; exit 77; }
  ip netns add "$B" || fail "second namespace"
  ip link add "$2" netns "$A" type veth peer name "$2" netns "$B" || { echo "SKIP: cannot create a veth pair"; exit 77; }
  ip -n "$A" addr add "$3.1/24" dev "$2" && ip -n "$B" addr add "$3.2/24" dev "$2" || fail "addresses"
  for _ns in "$A" "$B"; do ip -n "$_ns" link set lo up && ip -n "$_ns" link set "$2" up || fail "link up in $_ns"; done
}

# Kills what still runs in the namespaces of make_netns_pair and deletes them.
remove_netns_pair() {
  for _ns in ${A:-} ${B:-}; do
    _pids=$(ip netns pids "$_ns" 2>/dev/null)
    [ -z "$_pids" ] || kill -KILL $_pids 2>/dev/null
    ip netns del "$_ns" 2>/dev/null
  done
}

# The common start of a network-namespace test: $dir, removed on exit together with every
# background job and the namespaces of make_netns_pair (ranks left in them are killed).
begin_netns_test() {
  dir=$(mktemp -d)
  trap 'kill_background; remove_netns_pair; rm -rf "$dir"' EXIT
  trap 'exit 1' INT TERM
}
