#!/usr/bin/env bash
# readonly_output.sh PIPEBENCH RESULTS: an output on a read-only file
# system is refused before anything is written: `report --md OK --csv RO`
# exits 2 naming RO and leaves no OK behind. Needs root (a read-only tmpfs
# in a mount namespace of its own); skips (exit 77) elsewhere.
set -u
pipebench=$1 results=$2
if [[ $(id -u) -ne 0 ]] || ! unshare -m true 2>/dev/null; then
  echo "SKIP: a read-only mount needs root and unshare -m"; exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/ro"
out=$(unshare -m bash -c '
  mount -t tmpfs tmpfs "$1/ro" && mount -o remount,ro "$1/ro" || exit 77
  "$2" report "$3" --md "$1/ok.md" --csv "$1/ro/x.csv" 2>&1' _ "$work" "$pipebench" "$results")
code=$?
printf '%s\n' "$out"
[[ $code -eq 77 ]] && { echo "SKIP: could not mount a read-only tmpfs"; exit 77; }
[[ $code -eq 2 ]] || { echo "FAIL: exit code $code, want 2"; exit 1; }
grep -q "ro/x.csv: cannot write: Read-only file system" <<<"$out" || { echo "FAIL: RO not named"; exit 1; }
[[ ! -e $work/ok.md ]] || { echo "FAIL: ok.md was written"; exit 1; }
echo ok
