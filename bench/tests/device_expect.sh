#!/usr/bin/env bash
# device_expect.sh gpu|no-gpu CODE SECONDS REGEX -- COMMAND...
# expect_exit.sh for tests that depend on whether a GPU is present.
#   gpu     the test needs a GPU: when COMMAND says there is none (exit 2 with
#           "no usable GPU" or "built without CUDA/NCCL"), it is skipped
#           (exit 77, ctest's SKIP_RETURN_CODE) and says why;
#   no-gpu  the test checks the behaviour without one: skipped when
#           nvidia-smi lists a GPU.
set -u
need=$1; shift
if [[ $need == no-gpu ]] && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: a GPU is present (this test checks the behaviour without one)"
  exit 77
fi
want=$1; limit=$2; regex=$3; shift 4
out=$(timeout --kill-after=5 "$limit" "$@" 2>&1)
code=$?
printf '%s\n' "$out"
echo "--- exit code $code (want $want within ${limit}s)"
if [[ $need == gpu && $code -eq 2 ]] &&
   grep -Eq -- 'no usable GPU|built without (CUDA|NCCL)' <<<"$out"; then
  echo "SKIP: no GPU here: $(grep -Em1 -- 'no usable GPU|built without' <<<"$out")"
  exit 77
fi
if [[ $code -eq 124 || $code -eq 137 ]]; then echo "FAIL: did not finish within ${limit}s"; exit 1; fi
if [[ $code -ne $want ]]; then echo "FAIL: exit code $code, want $want"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$out"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
echo "ok"
