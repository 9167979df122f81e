#!/usr/bin/env bash
# ci/gpu-check rehearsed where there is no GPU, on this build tree, two
# schedules, in one of two modes:
#   cpu       the cpu backend stands in (PPB_GPU_CHECK_BACKEND=cpu): the
#             script's steps, figures, skips and archive. The gpu tests,
#             sweeps on 2 and 4 ranks with --check, --profile nvtx,cupti and
#             --trace, the memory step and 2 stages x 2 replicas PASS with
#             their figures; the device-only steps (gemm, cupti cost, p2p,
#             nccl, sanitizer) SKIP saying why; nothing FAILs;
#             PPB_GPU_CHECK_ARCHIVE packs the summary and the logs.
#   emulated  the cuda backend itself on the CUDA emulator
#             (PPB_GPU_CHECK_EMULATED=BUILD_DIR/cudaemu, a small model): the
#             sweeps (with CUPTI's device bubble beside the events'), memory,
#             dp, p2p 2rank and cupti cost steps PASS as they would on a GPU
#             and name the emulator as the device; the steps that need
#             NVIDIA's own libraries SKIP saying why.
# usage: gpu_check_rehearsal.sh BUILD_DIR [cpu|emulated]
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

mode=${2:-cpu}
summary=$tmp/out/gpu-check.txt
run_check() {
  OUT=$tmp/out PPB_GPU_CHECK_BUILD=$build PPB_GPU_CHECK_SCHEDULES=1f1b,zb-v \
    PPB_GPU_CHECK_ARCHIVE=$tmp/gpu-check.tar.gz "$@" bash "$root/ci/gpu-check" >"$tmp/log" 2>&1
  rc=$?
  [[ -f $summary ]] || { cat "$tmp/log"; fail "no summary $summary"; }
  cat "$summary"
  ((rc == 0)) || fail "ci/gpu-check exited $rc"
  ! grep -q '^FAIL' "$summary" || fail "a step failed"
  grep -q '^RESULT: passed' "$summary" || fail "no passing RESULT line"
}

if [[ $mode == emulated ]]; then
  # One schedule (emulated_run_cuda_check_* covers the others): the sweeps
  # are most of this test's time.
  run_check env PPB_GPU_CHECK_EMULATED="$build/cudaemu" PPB_GPU_CHECK_SCHEDULES=1f1b \
    PPB_GPU_CHECK_MODEL=gpt:layers=4,hidden=32,heads=2,seq=16,vocab=64,mbs=2
  for step in 'sweep P=2' 'sweep P=4' 'memory' 'dp' 'p2p 2rank' 'cupti cost'; do
    grep -q "^PASS  $step" "$summary" || fail "step '$step' did not pass"
  done
  # CUPTI (the emulator's) recorded every sweep run: its device bubble is
  # there beside the events' for each of them.
  for P in 2 4; do
    grep -Eq "^PASS  sweep P=$P .*device bubble vs events: max \|diff\| [0-9.]+ \([^)]*\), [0-9]+ of ([1-9][0-9]*) within 0.02" \
      "$summary" || fail "sweep P=$P: no device bubble from CUPTI"
  done
  grep -Eq '^PASS  cupti cost .*step with / without CUPTI: [0-9.]+, [0-9.]+' "$summary" ||
    fail "cupti cost: no ratios"
  # Every combination that can run on the model ran and passed its check, on
  # the emulated device, not the cpu backend.
  for P in 2 4; do
    grep -Eq "^PASS  sweep P=$P .* 0 not ok; check ([1-9][0-9]*)/\1 passed.*on pipebench CUDA emulator \(CPU\)" \
      "$summary" || fail "sweep P=$P: not every run checked on the emulator"
  done
  grep -Eq '^PASS  dp .*2 ok, 0 not ok; check 2/2 passed' "$summary" || fail "dp: not 2 checked runs"
  grep -Eq '^PASS  p2p 2rank .*; 0 wrong$' "$summary" || fail "p2p 2rank: wrong bytes"
  for step in 'gpu tests' 'gemm' 'p2p 1rank' 'nccl' 'sanitizer'; do
    grep -q "^SKIP  $step .*[a-z]" "$summary" || fail "step '$step' did not skip with a reason"
  done
  echo "gpu-check on the emulator: passed"
  exit 0
fi

run_check env PPB_GPU_CHECK_BACKEND=cpu
for step in 'gpu tests' 'sweep P=2' 'sweep P=4' 'memory' 'dp'; do
  grep -q "^PASS  $step" "$summary" || fail "step '$step' did not pass"
done
# Each sweep: 2 schedules x 3 partitions, every one checked against the reference.
for P in 2 4; do
  grep -q "^PASS  sweep P=$P .*6 ok, 0 not ok; check 6/6 passed" "$summary" ||
    fail "sweep P=$P: not 6 checked runs"
  n=$(ls "$tmp/out/sweep-P$P"/*.json 2>/dev/null | wc -l)
  ((n >= 6)) || fail "sweep P=$P wrote $n result files"
done
grep -q '^PASS  memory      12 combinations' "$summary" || fail "memory: not the 12 combinations"
grep -q '^PASS  dp .*2 ok, 0 not ok; check 2/2 passed' "$summary" || fail "dp: not 2 checked runs"
for step in 'gemm' 'cupti cost' 'p2p 1rank' 'p2p 2rank' 'nccl' 'sanitizer'; do
  grep -q "^SKIP  $step .*[a-z]" "$summary" || fail "step '$step' did not skip with a reason"
done
tar -tzf "$tmp/gpu-check.tar.gz" >"$tmp/contents" || fail "the archive does not read back"
grep -q '^./gpu-check.txt$' "$tmp/contents" || fail "the archive lacks the summary"
grep -q '^./logs/sweep-P2.txt$' "$tmp/contents" || fail "the archive lacks the logs"
echo "gpu-check rehearsal: passed"
