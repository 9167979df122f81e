#!/usr/bin/env bash
# ci/suite's cuda sweep end to end on the CUDA emulator (label emulated:
# this build's own pipebench with the emulator in place of the GPU), the
# other sweeps off, a small matrix (2 schedules x 1 partition of a 2-layer
# model on 2 ranks sharing the emulated GPU, seconds per night):
#  - --gpu-plan on 1, 2 and 9 emulated GPUs: 2 and 4 ranks sharing one GPU,
#    one rank per GPU on two (nccl where built), at most 8 ranks; --check
#    on every schedule of gpt-tiny alone the first night of a build;
#  - PPB_GPU_SWEEP=on without a GPU (CUDA_VISIBLE_DEVICES=''): exit 2, one
#    line saying why, nothing written; PPB_GPU_SWEEP=bogus: exit 2;
#  - night 1 clean; night 2 gated against it: exit 0;
#  - night 3 with PPB_PLANT_CUDA=1:2 (stage 1's actions twice as long, a
#    kernel on the stream after each): exit 1, the regression names the
#    combination and stage 1's compute, confirmed by a planted re-run in
#    cuda/<job>/rerun/; its GPU health probe (PPB_HEALTH=1) reads the tests'
#    stand-in NVML (fake_nvml.cpp, from $PPB_FAKE_NVML_DIR) reporting a
#    hardware slowdown, which the gate names beside the GPU, as it names
#    what the same NVML read during the sweep's runs; the driver,
#    known by NVML's version tonight only, is not called changed.
# Gated at PPB_THRESHOLD=0.25: the emulated GPU is this host's CPU, which
# has no speed probe in the cuda backend's results, and a 2-core VM's
# whole emulator once ran 10% slower through a clean night and its re-run
# (a regression, confirmed, at the default 7%); the plant doubles stage 1.
# Skipped (77), saying why, when the host was too busy for the gate to judge.
# usage: suite_cuda_e2e.sh PIPEBENCH   (the emulator first on LD_LIBRARY_PATH)
set -uo pipefail
pb=$(readlink -f "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

model="gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2"
job=cuda/gpt_layers=2_hidden=32_heads=2_seq=16_vocab=64_mbs=2-P2
export PPB_PIPEBENCH=$pb PPB_CPU_RUN=0 PPB_TIMED_RUN=0 PPB_DP_RUN=0 PPB_GPU_SWEEP=on \
  PPB_CUDA_MODELS=$model PPB_CUDA_SCHEDULES=1f1b,gpipe PPB_CUDA_PARTITIONS=layer
unset PPB_BASELINE PPB_PLANT_CUDA PPB_RESULTS PPB_CUDA_RANKS PPB_CUDAEMU_DEVICES PPB_MAX_SPEED_DRIFT

# The choices, without running anything.
plan() { PPB_CUDAEMU_DEVICES=$1 PPB_CUDA_MODELS="gpt-tiny gpt-small" PPB_CUDA_PARTITIONS= "$root/ci/suite" --gpu-plan "${@:2}" 2>&1; }
out=$(plan 1) || fail "--gpu-plan on one GPU: exit $?: $out"
grep -q "one GPU: 2 and 4 ranks share it" <<<"$out" || fail "one GPU: not 2 and 4 ranks sharing it: $out"
for p in 2 4; do
  grep -q "would run: mpirun $p ranks: .*--model gpt-tiny .*--transport mpi .*gpt-tiny-P$p --schedule 1f1b,gpipe --check$" <<<"$out" ||
    fail "one GPU: no checked gpt-tiny job on $p ranks over mpi (the first night): $out"
  grep -q "would run: mpirun $p ranks: .*--model gpt-small --dtype bf16 --profile nvtx,cupti --partition balanced --microbatches $((2 * p)) " <<<"$out" ||
    fail "one GPU: no gpt-small job on $p ranks (balanced, bf16, M=2P): $out"
done
grep -q -- "--model gpt-small.*--check" <<<"$out" && fail "gpt-small is checked: $out"
out=$(plan 2) || fail "--gpu-plan on two GPUs: exit $?"
grep -q "one rank per GPU on 2 of 2 GPUs" <<<"$out" || fail "two GPUs: not one rank per GPU: $out"
# nccl where this build has NCCL, else mpi saying why.
grep -q "^suite: 2 ranks: transport nccl (one GPU per rank)$\|^suite: 2 ranks: transport mpi (nccl: " <<<"$out" ||
  fail "two GPUs: the transport is not nccl, nor mpi saying why not: $out"
transport=$(grep -o "^suite: 2 ranks: transport [a-z]*" <<<"$out" | awk '{print $NF}')
[[ $(grep -c "would run: mpirun 2 ranks: .*--transport $transport " <<<"$out") -eq 2 ]] ||
  fail "two GPUs: not 2 jobs (gpt-tiny, gpt-small) over $transport: $out"
grep -q "would run: mpirun 4 ranks" <<<"$out" && fail "two GPUs: 4 ranks: $out"
out=$(plan 9) || fail "--gpu-plan on nine GPUs: exit $?"
grep -q "one rank per GPU on 8 of 9 GPUs" <<<"$out" || fail "nine GPUs: not 8 ranks: $out"
echo "ok: --gpu-plan on 1, 2 and 9 GPUs"

# Bad input: exit 2, one line, nothing written.
bad() {
  local want=$1 out code; shift
  out=$(env "$@" PPB_RESULTS="$tmp/bad" "$root/ci/suite" 2>&1)
  code=$?
  echo "--- $*: exit $code: $out"
  ((code == 2)) || fail "$*: exit $code, want 2"
  [[ $(wc -l <<<"$out") -eq 1 && $out == *"$want"* ]] || fail "$*: said '$out', want '$want'"
  [[ ! -e $tmp/bad ]] || fail "$*: it wrote $tmp/bad"
}
bad "PPB_GPU_SWEEP=on, but there is no GPU here: no CUDA device" CUDA_VISIBLE_DEVICES=
bad "PPB_GPU_SWEEP: expected auto, on or off, got 'bogus'" PPB_GPU_SWEEP=bogus

export PPB_CUDA_RANKS=2 PPB_THRESHOLD=0.25
# check and suite (suite_helpers.sh): ci/suite run and its verdicts checked.
source "$root/bench/tests/suite_helpers.sh"
suite_show='^(suite: (cuda|--check|confirming|2 ranks)|gate|  REGRESSION|  IMPROVEMENT|  UNDECIDABLE)'

PPB_RESULTS=$tmp/nights/n1 suite n1 0
grep -q "^suite: --check on every schedule: the first night of build" "$tmp/n1.log" ||
  fail "n1: not checked as the first night of its build"
n=$(find "$tmp/nights/n1/$job" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n == 2)) || fail "n1: $n results in $job, want 2"
PPB_RESULTS=$tmp/nights/n2 suite n2 0 --baseline "$tmp/nights/n1"
grep -q "^suite: --check on [01] of 2 schedules .*ran before, so 1 in 4 by UTC day" "$tmp/n2.log" ||
  fail "n2: the build ran before, but its check was not a 1 in 4 sample"
[[ -f ${PPB_FAKE_NVML_DIR:-}/libnvidia-ml.so.1 ]] || fail "no stand-in NVML in PPB_FAKE_NVML_DIR='${PPB_FAKE_NVML_DIR:-}'"
PPB_RESULTS=$tmp/slow PPB_PLANT_CUDA=1:2 PPB_HEALTH=1 PPB_FAKE_NVML_REASONS=0x8 \
  PPB_HEALTH_ARGS="--repeats 2 --iters 1 --copy-bytes 1MiB --model $model" \
  LD_LIBRARY_PATH=$PPB_FAKE_NVML_DIR:${LD_LIBRARY_PATH:-} \
  suite slow 1 --baseline "$tmp/nights/n1" --baseline "$tmp/nights/n2"
grep -q "GPU 0 pipebench CUDA emulator (CPU) (0000:01:00.0): throttled tonight: hw_slowdown (SM clock down to 1980 MHz, up to 42 C)" "$tmp/slow.log" ||
  fail "slow: the gate did not name the throttled GPU: $(grep -i -A3 "health" "$tmp/slow.log")"
# The runs of the sweep sampled the same NVML: the gate names the slowdown
# they saw too, on the GPU as the runs name it (host: name (bus)).
grep -qE "GPU STATE [^ ]+: pipebench CUDA emulator \(CPU\) \(0000:01:00.0\): throttled during the GPU sweep: hw_slowdown \(SM clock down to 1980 MHz, up to 42 C\)" "$tmp/slow.log" ||
  fail "slow: the gate did not name the GPU the sweep saw throttled: $(grep -i -A3 "health" "$tmp/slow.log")"
# NVML there tonight and not before: the driver is known by another form
# ("999.12.34" against "CUDA 13.0"), which is no driver change.
grep -q "driver CUDA [0-9.]* -> 999" "$tmp/slow.log" && fail "slow: NVML's driver version read as a driver change"
for s in 1f1b gpipe; do
  check slow "$s x layer not a confirmed regression of stage 1's compute" grep -qE \
    "^  REGRESSION $s x layer P=2 M=4 \[planted stage 1 x2\]: .*stage 1 compute .*confirmed by a re-run" "$tmp/slow.log"
done
n=$(find "$tmp/slow/$job/rerun" -maxdepth 1 -name '*.json' ! -name '*.trace.json' | wc -l)
((n >= 2)) || fail "slow: $n results in $job/rerun/, want the 2 regressions"
grep -q '"plant": "stage 1 x2"' "$tmp/slow/$job/rerun/1f1b__layer__P2_M4.json" ||
  fail "slow: the re-run was not planted as the night was"
echo "ok"
