#!/usr/bin/env bash
# Installs the Debian packages collx needs to build and test, when they are missing.
# Runs apt-get only when something is missing; needs root (or sudo) in that case.
set -euo pipefail

required=(cmake g++ make ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev)
# Optional parts used by the build and the baselines when present.
optional=(libssl-dev openmpi-bin libopenmpi-dev libucx-dev libhwloc-dev iproute2)
# The torch.distributed backend (bindings/torch, docs/torch.md) and its tests.
optional+=(python3-torch libtorch-dev pybind11-dev python3-dev)

missing=()
for pkg in "${required[@]}" "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "collx: installing missing packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "collx: not root and no sudo; install these packages yourself: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
