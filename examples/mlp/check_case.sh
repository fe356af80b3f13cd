#!/usr/bin/env bash
# check_case.sh BIN NPROC TOLERANCE WORKDIR ARGS... [-- REFERENCE_ARGS...]: run the example
# on one process (the reference, with REFERENCE_ARGS) and on NPROC processes with ARGS,
# then compare them step by step.
set -eu
bin=$1 nproc=$2 tol=$3 work=$4
shift 4
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
# MLP_SKIP_WITHOUT_DEVICE=1 (the real-GPU cases): exit 77, naming why, without a usable device.
if [ "${MLP_SKIP_WITHOUT_DEVICE:-0}" = 1 ]; then "$bin" --has-device || exit $?; fi
mkdir -p "$work"
"$here/launch.sh" 1 "$bin" --steps 6 --out "$work/reference.txt" "$@"
"$here/launch.sh" "$nproc" "$bin" --steps 6 --out "$work/run.txt" "${args[@]}"
"$bin" --compare "$work/reference.txt" "$work/run.txt" "$tol"
