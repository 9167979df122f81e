#!/usr/bin/env bash
# ci/gpu-check rehearsed where there is no GPU: the same script with the cpu
# backend standing in (PPB_GPU_CHECK_BACKEND=cpu) on this build tree, two
# schedules. Its steps must run and report as on a GPU machine: the gpu
# tests, sweeps on 2 and 4 ranks with --check, --profile nvtx,cupti and
# --trace, the memory step and 2 stages x 2 replicas PASS with their figures; the device-only
# steps (gemm, cupti cost, p2p, nccl, sanitizer) SKIP saying why; nothing FAILs; PPB_GPU_CHECK_ARCHIVE packs the
# summary and the logs into one file.
# usage: gpu_check_rehearsal.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

OUT=$tmp/out PPB_GPU_CHECK_BUILD=$build PPB_GPU_CHECK_BACKEND=cpu PPB_GPU_CHECK_SCHEDULES=1f1b,zb-v \
  PPB_GPU_CHECK_ARCHIVE=$tmp/gpu-check.tar.gz bash "$root/ci/gpu-check" >"$tmp/log" 2>&1
rc=$?
summary=$tmp/out/gpu-check.txt
[[ -f $summary ]] || { cat "$tmp/log"; fail "no summary $summary"; }
cat "$summary"
((rc == 0)) || fail "ci/gpu-check exited $rc"
! grep -q '^FAIL' "$summary" || fail "a step failed"
grep -q '^RESULT: passed' "$summary" || fail "no passing RESULT line"
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
