#!/usr/bin/env bash
# ranks_disagree.sh PIPEBENCH MPIEXEC: ranks that were asked different
# things end the job with exit 2 and one line from rank 0, before anything
# runs, never a result that mixes them:
#  - started with different flags (an MPMD launch: gpipe on rank 0, 1f1b
#    on rank 1), or a bad flag on rank 1 alone (named by rank 1);
#  - `run --rerun DIR` where rank 1 sees other result files at DIR (another
#    host's copy; here a bind mount in a mount namespace of its own, which
#    needs root: that case skips elsewhere, saying so).
set -u
pipebench=$1 mpiexec=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
common=(run --backend timed --partition layer --microbatches 4 -n 1 -w 0 --timeout 30)
expect() {  # expect WHAT REGEX COMMAND...: exit 2, the line, and no --out folder written
  local what=$1 regex=$2; shift 2
  local out code
  out=$(timeout -k 5 60 "$@" 2>&1); code=$?
  printf '%s\n' "$out"
  [[ $code -eq 2 ]] || { echo "FAIL ($what): exit code $code, want 2"; exit 1; }
  grep -Eq "$regex" <<<"$out" || { echo "FAIL ($what): no line matching /$regex/"; exit 1; }
}
expect "flags" "^pipebench\[r0\]: the ranks were started with different flags .*: rank 1 differs from rank 0$" \
  "$mpiexec" -np 1 "$pipebench" "${common[@]}" --schedule gpipe --out "$work/mpmd" \
  : -np 1 "$pipebench" "${common[@]}" --schedule 1f1b --out "$work/mpmd"
[[ ! -e $work/mpmd ]] || { echo "FAIL (flags): $work/mpmd was written"; exit 1; }
# A flag only rank 1 was given, bad: rank 0 waits for it in MPI_Init, so
# rank 1 names it itself (rank 0 would, had it the flag too).
expect "one rank's bad flag" "^pipebench\[r1\]: --iters: expected a decimal integer, got 'abc'" \
  "$mpiexec" -np 1 "$pipebench" "${common[@]}" --schedule gpipe --out "$work/mpmd" \
  : -np 1 "$pipebench" "${common[@]}" --schedule gpipe --out "$work/mpmd" --iters abc
[[ ! -e $work/mpmd ]] || { echo "FAIL (one rank's bad flag): $work/mpmd was written"; exit 1; }

mkdir -p "$work/a" "$work/b"
if [[ $(id -u) -ne 0 ]] || ! unshare -m mount --bind "$work/a" "$work/b" 2>/dev/null; then
  echo "ok (flags); SKIP (--rerun): another view of the files needs root and a bind mount in unshare -m"
  exit 0
fi
for s in gpipe 1f1b; do
  timeout -k 5 60 "$mpiexec" -np 2 "$pipebench" "${common[@]}" --schedule "$s" --out "$work/$s" \
    >/dev/null 2>&1 || { echo "FAIL: the $s run for --rerun exited $?"; exit 1; }
done
expect "--rerun" "^pipebench\[r0\]: --rerun: the ranks read different result files .*: rank 1 differs from rank 0$" \
  "$mpiexec" -np 1 "$pipebench" run --rerun "$work/gpipe" --out "$work/again" \
  : -np 1 unshare -m bash -c 'mount --bind "$1" "$2" || exit 77; shift 2; exec "$@"' _ \
  "$work/1f1b" "$work/gpipe" "$pipebench" run --rerun "$work/gpipe" --out "$work/again"
[[ ! -e $work/again ]] || { echo "FAIL (--rerun): $work/again was written"; exit 1; }
echo ok
