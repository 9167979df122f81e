#!/usr/bin/env bash
# ci/suite itself, end to end, with a small matrix (2 schedules x 1
# partition per sweep, 2 ranks, no 32-rank data-parallel run, seconds per
# night) and the built pipebench:
#  - two unchanged nights, the second gated against the first: exit 0;
#  - a planted 25% speed-up of the timed sweep's stage 1 gated against both:
#    exit 0, its improvements are measured again like regressions would be
#    (the re-runs in timed/rerun/, recorded with the plant) and confirmed;
#  - --regate gates that night again against the first night alone, without
#    a new sweep: its own re-runs in timed/rerun-<time>/, its own reports in
#    regate-<time>/, the first gate's left as they were; the first night
#    gated again against the folder of every night has no earlier night
#    (the one after it is left out, and named);
#  - a sweep whose job fails (a rank throws, or the job dies before it
#    writes anything) does not end the night: the other sweep and the
#    report run, and the suite exits 3 naming the job;
#  - a SIGTERM to the suite ends its running job with it (exit 143);
#  - bad invocations of --regate exit 2 with one line naming the problem.
# The cpu sweep runs one rank more than the cores (up to 4 ranks), so its
# rows are marked oversubscribed and kept out of the gate: on a 2-core
# machine two launches of the cpu backend can differ by more than the
# threshold on one stage (+7.9% confirmed by a re-run, against one earlier
# night, in about 1 run in 15), and a two-combination sweep has too few
# figures for a noise floor. The verdicts checked are the timed sweep's
# (sleeps); the cpu sweep's plumbing still runs every night. With more
# cores (2 ranks, judged) it is as before.
# Skipped (77), saying why, when the host was too busy for the gate to judge.
# usage: suite_e2e.sh PIPEBENCH
set -uo pipefail
pb=$(readlink -f "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cpu_ranks=$(($(getconf _NPROCESSORS_ONLN) + 1))
((cpu_ranks <= 4)) || cpu_ranks=2
export PPB_PIPEBENCH=$pb PPB_SCHEDULES=1f1b,gpipe PPB_CPU_PARTITIONS=layer \
  PPB_TIMED_PARTITIONS=layer PPB_CPU_RANKS=$cpu_ranks PPB_TIMED_RANKS=2 PPB_CPU_MICROBATCHES=4 \
  PPB_TIMED_MICROBATCHES=8 PPB_TIMED_MODEL=gpt-tiny PPB_CPU_ITERS=6 PPB_TIMED_ITERS=10 \
  PPB_MIN_TIME=0 PPB_DP_RUN=0 PPB_GPU_SWEEP=off
unset PPB_BASELINE PPB_PLANT_CPU PPB_PLANT_TIMED PPB_PLANT_CUDA PPB_RESULTS PPB_THRESHOLD PPB_MAX_SPEED_DRIFT

# check and suite (suite_helpers.sh): ci/suite run and its verdicts checked.
source "$root/bench/tests/suite_helpers.sh"

PPB_RESULTS=$tmp/nights/n1 suite n1 0
PPB_RESULTS=$tmp/nights/n2 suite n2 0 --baseline "$tmp/nights/n1"
if ((cpu_ranks > $(getconf _NPROCESSORS_ONLN))); then
  grep -q "^suite: cpu backend, $cpu_ranks ranks on .* (OVERSUBSCRIBED: results marked, kept out of the gate)" \
    "$tmp/n2.log" && grep -q "^gate: .* 2 excluded " "$tmp/n2.log" ||
    fail "n2: the oversubscribed cpu sweep was not kept out of the gate"
fi

# A planted improvement: re-run, as a regression would be, and confirmed.
# x0.75 keeps both figures it moves clear of the gate's threshold (7%; 0.07
# bubble points) on both runs: samples/s +11% (1f1b) and +9% (gpipe), the
# bubble +0.03 and +0.04. At x0.85 gpipe's samples/s moved +7.5%, and a
# re-run's +6.8% left it undecidable; at x0.7 gpipe's bubble moves +0.06.
PPB_RESULTS=$tmp/fast PPB_PLANT_TIMED=1:0.75 \
  suite fast 0 --baseline "$tmp/nights/n1" --baseline "$tmp/nights/n2"
check fast "the two improved timed combinations were not measured again" \
  grep -qE "^suite: confirming: [0-9]+ cpu, 2 timed[ ,]" "$tmp/fast.log"
n=$(find "$tmp/fast/timed/rerun" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 2)) || fail "fast: $n results in timed/rerun/, want 2"
for s in 1f1b gpipe; do
  check fast "$s not a confirmed improvement" grep -qE \
    "^  IMPROVEMENT $s x layer P=2 M=8 \[planted stage 1 x0.75\]: .*confirmed by a re-run" "$tmp/fast.log"
done
grep -q "re-runs confirming or refuting tonight's timing changes in $tmp/fast/timed/rerun" \
  "$tmp/fast.log" || fail "fast: the log does not say where the re-runs are"
first_md=$(md5sum <"$tmp/fast/report.md")

# Gated again, against night 1 alone: its own re-runs and reports.
suite regate 0 --regate "$tmp/fast" --baseline "$tmp/nights/n1"
grep -q "^suite: re-gating the results in $tmp/fast (cpu timed) against $tmp/nights/n1: no new sweep" \
  "$tmp/regate.log" || fail "regate: it does not say what it re-gates"
grep -q "^suite: timed backend" "$tmp/regate.log" && fail "regate: it ran a sweep"
reruns=("$tmp"/fast/timed/rerun-*)
((${#reruns[@]} == 1)) && [[ -d ${reruns[0]} ]] || fail "regate: no timed/rerun-<time>/ of its own"
n=$(find "${reruns[0]}" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 2)) || fail "regate: $n results in ${reruns[0]}, want 2"
reports=("$tmp"/fast/regate-*)
for f in report.md report.html report.junit.xml report.csv; do
  [[ -s ${reports[0]}/$f ]] || fail "regate: no $f in ${reports[0]}"
done
grep -q "against 1 earlier night(s)" "${reports[0]}/report.md" ||
  fail "regate: not compared with night 1 alone"
for s in 1f1b gpipe; do
  check regate "$s not a confirmed improvement" grep -qE \
    "^  IMPROVEMENT $s x layer P=2 M=8 \[planted stage 1 x0.75\]: .*confirmed by a re-run" "$tmp/regate.log"
done
[[ $(md5sum <"$tmp/fast/report.md") == "$first_md" ]] || fail "regate: it rewrote the first gate's report"
n=$(find "$tmp/fast/timed/rerun" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 2)) || fail "regate: it touched the first gate's re-runs ($n files)"

# The first night gated again against the folder of every night: itself and
# the night after it are left out, and said to be, so nothing is compared.
suite regate_first 0 --regate "$tmp/nights/n1" --baseline "$tmp/nights"
grep -q "^gate: left out 1 night(s) of --baseline that began after tonight did (at .*): n2; " \
  "$tmp/regate_first.log" || fail "regate_first: the later night n2 was not named"$'\n'"$(tail -20 "$tmp/regate_first.log")"
grep -q "^gate: no earlier night in $tmp/nights: every night there began after tonight did" \
  "$tmp/regate_first.log" || fail "regate_first: it does not say there was nothing before n1"

# A sweep whose job fails does not end the night. faulty NAME BACKEND WHAT:
# a night whose BACKEND sweep's job fails (through a wrapper around the
# real pipebench): WHAT "throw", a rank throws in the last combination (the
# hidden --debug-fault); "dead", the job ends before it starts pipebench.
# The exit code is checked as such (not skipped on a busy host: the gate's
# verdicts do not change it).
faulty() {
  local name=$1 backend=$2 what=$3 code
  cat >"$tmp/$name.pb" <<EOF
#!/usr/bin/env bash
if [[ \$1 == run && " \$* " == *" --backend $backend "* ]]; then
  [[ $what == dead ]] && exit 1
  exec "$pb" "\$@" --debug-fault 1:measure:throw
fi
exec "$pb" "\$@"
EOF
  chmod +x "$tmp/$name.pb"
  PPB_PIPEBENCH=$tmp/$name.pb PPB_RESULTS=$tmp/$name "$root/ci/suite" --baseline "$tmp/nights/n1" \
    >"$tmp/$name.log" 2>&1
  code=$?
  echo "--- $name: the $backend job fails ($what): ci/suite -> exit $code"
  ((code == 3)) || fail "$name: exit $code, want 3"$'\n'"$(tail -30 "$tmp/$name.log")"
  grep -qE "^suite: the $backend sweep's job FAILED \(exit [0-9]+" "$tmp/$name.log" ||
    fail "$name: the failed $backend job was not named"
  grep -qE "^suite: FAILED: the job of $backend \(exit [0-9]+\)" "$tmp/$name.log" ||
    fail "$name: the suite's last line does not name the failed job"
  [[ -s $tmp/$name/report.junit.xml && -s $tmp/$name/report.md ]] ||
    fail "$name: no report after the failed sweep"
}
# The cpu job's first combination was measured; the timed sweep ran after
# it; the cpu combination its job died in is missing against night 1.
faulty throw cpu throw
n=$(find "$tmp/throw/cpu" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 1)) || fail "throw: $n cpu results, want 1 (the one before the planted failure)"
n=$(find "$tmp/throw/timed" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 2)) || fail "throw: $n timed results, want 2 (the sweep after the failed one ran)"
grep -q "missing" "$tmp/throw/report.junit.xml" ||
  fail "throw: the cpu combination the failed job did not measure is not reported missing"
# The timed job wrote nothing, not even its folder: the report reads cpu/.
faulty dead timed dead
[[ ! -e $tmp/dead/timed ]] || fail "dead: the timed job left a folder"
grep -q "^suite: no $tmp/dead/timed: its job wrote nothing" "$tmp/dead.log" ||
  fail "dead: the missing timed folder was not named"

# Stopped: a SIGTERM to the suite alone (a scheduler's time limit, a
# harness that kills its PID) ends its running job too, with one line and
# exit 143, instead of counting the ended job as a failed sweep and going on.
PPB_RESULTS=$tmp/stopped PPB_CPU_RUN=0 PPB_TIMED_ITERS=2000 "$root/ci/suite" >"$tmp/stopped.log" 2>&1 &
suite_pid=$!
for ((i = 0; i < 600; ++i)); do
  [[ -e $tmp/stopped/timed ]] && grep -q "^suite: timed backend" "$tmp/stopped.log" && break
  sleep 0.1
done
sleep 1
kill -TERM "$suite_pid"
stopped_at=$(date +%s)
wait "$suite_pid"
code=$?
echo "--- stopped: ci/suite -> exit $code $(($(date +%s) - stopped_at)) s after its SIGTERM"
((code == 143)) || fail "stopped: exit $code, want 143"$'\n'"$(tail -20 "$tmp/stopped.log")"
grep -q "^suite: stopped by SIGTERM; its running job was ended; the results finished before it are in $tmp/stopped" \
  "$tmp/stopped.log" || fail "stopped: no line saying so"$'\n'"$(tail -20 "$tmp/stopped.log")"
grep -q "FAILED" "$tmp/stopped.log" && fail "stopped: the ended job was taken for a failed sweep"
sleep 0.5
pgrep -f -- "--out $tmp/stopped/timed" >/dev/null && fail "stopped: its job runs on after it"

# Bad invocations: exit 2, one line naming the problem, nothing written.
bad() {
  local want=$1 out code; shift
  out=$("$root/ci/suite" "$@" 2>&1)
  code=$?
  echo "--- ci/suite $*: exit $code: $out"
  ((code == 2)) || fail "ci/suite $*: exit $code, want 2"
  [[ $(wc -l <<<"$out") -eq 1 && $out == *"$want"* ]] || fail "ci/suite $*: said '$out', want '$want'"
}
before=$(find "$tmp" | sort | md5sum)
bad "gates against a --baseline, and none was given" --regate "$tmp/fast"
bad "--regate: no such folder '$tmp/none'" --regate "$tmp/none" --baseline "$tmp/nights/n1"
bad "--baseline '$tmp/nights/n2/timed' is or lies inside '$tmp/nights/n2'" --regate "$tmp/nights/n2" --baseline "$tmp/nights/n2/timed"
bad "holds no cpu/, timed/, dp/ or cuda/ results" --regate "$tmp/fast/regate-"* --baseline "$tmp/nights/n1"
bad "--regate needs a results folder" --baseline "$tmp/nights/n1" --regate
PPB_HISTORY=ten bad "PPB_HISTORY: expected a count of nights >= 1, got 'ten'" --baseline "$tmp/nights"
PPB_HISTORY=0 bad "PPB_HISTORY: expected a count of nights >= 1, got '0'" --baseline "$tmp/nights"
PPB_HISTORY=3000000000 bad "PPB_HISTORY: expected a count in 1..1000, got '3000000000'"
PPB_CPU_RANKS=abc bad "PPB_CPU_RANKS: expected a count in 1..4096, got 'abc'"
PPB_CPU_RANKS=0 bad "PPB_CPU_RANKS: expected a count in 1..4096, got '0'"
PPB_TIMED_ITERS=010 bad "PPB_TIMED_ITERS: expected a count in 1..100000, got '010'"
PPB_MIN_TIME=soon bad "PPB_MIN_TIME: expected seconds in 0..86400, got 'soon'"
PPB_MIN_TIME=90000 bad "PPB_MIN_TIME: expected seconds in 0..86400, got '90000'"
PPB_TIMEOUT=-1 bad "PPB_TIMEOUT: expected seconds in 0..86400, got '-1'"
PPB_DP_RUN=no bad "PPB_DP_RUN: expected one of 0 1, got 'no'"
PPB_HEALTH=maybe bad "PPB_HEALTH: expected one of auto 0 1, got 'maybe'"
PPB_PLANT_CPU=1 bad "PPB_PLANT_CPU: expected STAGE:FACTOR with FACTOR in (0, 100] (e.g. 1:1.10), got '1'"
PPB_PLANT_TIMED=1:500 bad "PPB_PLANT_TIMED: expected STAGE:FACTOR with FACTOR in (0, 100] (e.g. 1:1.10), got '1:500'"
PPB_THRESHOLD=1 bad "PPB_THRESHOLD: expected a fraction in [0, 1) (e.g. 0.1), got '1'"
PPB_MAX_SPEED_DRIFT=0 bad "PPB_MAX_SPEED_DRIFT: expected a fraction in (0, 1) (e.g. 0.1), got '0'"
PPB_MAX_SPEED_DRIFT=5% bad "PPB_MAX_SPEED_DRIFT: expected a fraction in (0, 1) (e.g. 0.1), got '5%'"
PPB_PIPEBENCH=$tmp bad "PPB_PIPEBENCH: not an executable file: '$tmp'"
PPB_CPU_RUN=0 PPB_TIMED_RUN=0 PPB_DP_RUN=0 PPB_GPU_SWEEP=off bad "nothing to run: PPB_CPU_RUN, PPB_TIMED_RUN and PPB_DP_RUN are 0 and there is no cuda sweep"
[[ $(find "$tmp" | sort | md5sum) == "$before" ]] || fail "a refused invocation wrote files"
echo "ok"
