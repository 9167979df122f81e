#!/usr/bin/env bash
# p2p_timeout.sh PIPEBENCH MPIEXEC: `p2p --timeout 2` with rank 1 stopped
# (SIGSTOP) while it measures: rank 0 names the size it was stuck at, and
# the job ends with exit 1 within seconds, not never.
set -u
pipebench=$1 mpiexec=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
log=$(mktemp); trap 'rm -f "$log"' EXIT
timeout -k 5 60 "$mpiexec" -np 2 "$pipebench" p2p --max 64MiB -n 1000 --timeout 2 >"$log" 2>&1 &
job=$!
pid=""
for _ in $(seq 200); do  # rank 1, once it measures
  for q in $(pgrep -f "pipebench p2p --max 64MiB -n 1000 --timeout 2"); do
    [[ $(cat /proc/"$q"/comm 2>/dev/null) == pipebench ]] || continue
    tr '\0' '\n' </proc/"$q"/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && pid=$q
  done
  [[ -n $pid ]] && grep -q "^ *[0-9]" "$log" && break
  sleep 0.05
done
[[ -n $pid ]] || { cat "$log"; echo "FAIL: rank 1 never started measuring"; exit 1; }
start=$(date +%s)
kill -STOP "$pid"
wait "$job"; code=$?
took=$(( $(date +%s) - start ))
cat "$log"
echo "--- exit code $code, $took s after rank 1 stopped"
[[ $code -eq 1 ]] || { echo "FAIL: exit code $code, want 1"; exit 1; }
((took <= 20)) || { echo "FAIL: took $took s"; exit 1; }
grep -Eq "pipebench\[r0\]: rank 0: stuck for [0-9.]+ s measuring [0-9]+ bytes .*\(--timeout 2\)" "$log" ||
  { echo "FAIL: no line naming the size rank 0 was stuck at"; exit 1; }
echo ok
