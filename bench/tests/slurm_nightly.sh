#!/usr/bin/env bash
# The nightly job on a real scheduler: a single-node Slurm (ci/slurm-local:
# munged, slurmctld, slurmd) runs ci/nightly.sbatch three times with a small
# matrix (2 schedules, 2 ranks per sweep, no 32-rank data-parallel run,
# seconds per night):
#  night 1: the job runs its MPI jobs with srun, ends COMPLETED (exit 0) and
#           leaves its results (cpu/, timed/), report and JUnit in its own
#           folder under the nights' folder, and the `latest` link;
#  night 2: a planted 50% slowdown of the timed sweep's stage 1
#           (PPB_PLANT_TIMED) is gated against night 1: the job fails (exit
#           1), its gate names the planted regression, its JUnit holds
#           failures, and night 1's folder is still there;
#  night 3: as planted, with PPB_HISTORY=1: compared with night 2 alone
#           (exit 0), night 1 read only to judge night 2 again.
# Skipped (77), saying why, without root or Slurm and munge (ci/setup-deps
# installs them), or when the host was too busy for the gate to judge.
# usage: slurm_nightly.sh PIPEBENCH
set -uo pipefail
pb=$(readlink -f "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "a test Slurm cluster needs root"
for tool in munged slurmctld slurmd sbatch srun; do
  command -v "$tool" >/dev/null || skip "no '$tool' here (ci/setup-deps installs munge and Slurm)"
done

tmp=$(mktemp -d)
trap '"$root/ci/slurm-local" stop "$tmp/slurm"; rm -rf "$tmp"' EXIT
"$root/ci/slurm-local" start "$tmp/slurm" || fail "the test cluster did not start"
export SLURM_CONF=$tmp/slurm/slurm.conf

# The small matrix; everything else as the nightly job runs it.
export PPB_PIPEBENCH=$pb PPB_NIGHTS=$tmp/nights PPB_SCHEDULES=1f1b,gpipe \
  PPB_CPU_PARTITIONS=layer PPB_TIMED_PARTITIONS=layer PPB_CPU_RANKS=2 PPB_TIMED_RANKS=2 \
  PPB_CPU_MICROBATCHES=4 PPB_TIMED_MICROBATCHES=8 PPB_TIMED_MODEL=gpt-tiny \
  PPB_CPU_ITERS=6 PPB_TIMED_ITERS=10 PPB_MIN_TIME=0 PPB_DP_RUN=0

# night NAME WANT_EXIT: one sbatch --wait of the nightly job.
night() {
  local name=$1 want=$2 code
  # Submitted from the repository, as the README says (the job finds it there).
  # Bounded below ctest's limit (300 s for three nights): a test ctest kills
  # would leave the test cluster's daemons and job steps running.
  (cd "$root" && timeout -k 5 90 sbatch --wait --output="$tmp/$name.log" ci/nightly.sbatch >/dev/null)
  code=$?
  ((code == 124 || code == 137)) && fail "$name: the job did not end within 90 s"
  echo "--- $name: sbatch --wait exit $code"
  cat "$tmp/$name.log"
  if ((code != want)); then
    if ((want == 1)) && grep -qs "the host was busy" "$tmp/$name.log" "$tmp/nights/latest/report.junit.xml"; then
      skip "$name: the host was busy with other processes; the gate did not judge its timings"
    fi
    fail "$name: the job exited $code, want $want"
  fi
}

night n1 0
n1=$(readlink -f "$tmp/nights/latest") || fail "no latest link after night 1"
grep -q "started by srun" "$tmp/n1.log" || fail "night 1 did not start its MPI jobs with srun"
for f in report.md report.html report.junit.xml; do
  [[ -s $n1/$f ]] || fail "night 1 left no $f in $n1"
done
for sweep in cpu timed; do
  n=$(find "$n1/$sweep" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
  ((n == 2)) || fail "night 1: $n results in $sweep/, want 2"
done
grep -q "<failure" "$n1/report.junit.xml" && fail "night 1 (no baseline) has JUnit failures"

PPB_PLANT_TIMED=1:1.5 night n2 1
n2=$(readlink -f "$tmp/nights/latest")
[[ $n2 != "$n1" && -d $n1 ]] || fail "night 2 did not get a folder of its own beside night 1's"
grep -q "compared with 1 earlier night" "$tmp/n2.log" || fail "night 2 was not compared with night 1"
grep -q "<failure" "$n2/report.junit.xml" || fail "night 2's JUnit has no failure"
grep -qE "REGRESSION .*\[planted stage 1 x1.5\]" "$tmp/n2.log" ||
  fail "night 2's gate does not name the planted regression"
grep -q "planted stage 1 x1.5" "$n2/report.md" || fail "night 2's report does not show the plant"

# Night 3, as planted as night 2, with PPB_HISTORY=1: compared with night 2
# alone (no change: exit 0), and night 1 read, only to judge night 2 again.
PPB_HISTORY=1 PPB_PLANT_TIMED=1:1.5 night n3 0
grep -q "compared with 1 earlier night(s) (the last: $n2), reading the 1 before them" "$tmp/n3.log" ||
  fail "night 3 did not compare with night 2 alone, reading night 1"
n3=$(readlink -f "$tmp/nights/latest")
grep -q "against 1 earlier night(s)" "$n3/report.md" || fail "night 3's gate did not use a window of 1"
echo "ok"
