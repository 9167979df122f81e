#!/usr/bin/env bash
# p2p_json_rank0.sh PIPEBENCH MPIEXEC: `p2p --json` is checked where it is
# written, on rank 0 alone: rank 1 sees the folder read-only (a read-only
# tmpfs mounted over it in a mount namespace of its own, as a folder
# writable only on rank 0's host), and the run still measures and writes
# the file. Needs root; skips (exit 77) elsewhere.
set -u
pipebench=$1 mpiexec=$2
if [[ $(id -u) -ne 0 ]] || ! unshare -m true 2>/dev/null; then
  echo "SKIP: a read-only mount needs root and unshare -m"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/out"
# Tried once outside the job: inside it, a rank that cannot mount would fail
# the job rather than skip.
if ! unshare -m bash -c 'mount -t tmpfs tmpfs "$1" && mount -o remount,ro "$1"' _ "$work/out"; then
  echo "SKIP: could not mount a read-only tmpfs"; exit 77
fi
flags=(p2p --max 1KiB -n 2 --json "$work/out/p.json")
out=$(timeout -k 5 60 "$mpiexec" -np 1 "$pipebench" "${flags[@]}" : -np 1 unshare -m bash -c '
  mount -t tmpfs tmpfs "$1" && mount -o remount,ro "$1" || exit 77
  shift; exec "$@"' _ "$work/out" "$pipebench" "${flags[@]}" 2>&1)
code=$?
printf '%s\n' "$out"
[[ $code -eq 0 ]] || { echo "FAIL: exit code $code, want 0"; exit 1; }
grep -q '"schema"' "$work/out/p.json" || { echo "FAIL: rank 0 wrote no p.json"; exit 1; }
echo ok
