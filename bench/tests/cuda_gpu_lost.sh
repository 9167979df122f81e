#!/usr/bin/env bash
# A GPU lost in the middle of a cuda sweep, on the CUDA emulator (label
# emulated): rank 1's device falls off the bus at its 1100th kernel launch
# (PPB_CUDAEMU_LOSE_AFTER, that rank alone), in the second of two
# combinations. The job ends promptly (well inside --timeout's reach, by the
# failed call's own abort), exits non-zero, names the rank and its GPU (index
# and PCI bus id); the first combination's result is intact and nothing of
# the second is written; --resume, the device back, completes the sweep
# without touching the first result.
# usage: cuda_gpu_lost.sh PIPEBENCH MPIEXEC   (the emulator first on LD_LIBRARY_PATH)
set -uo pipefail
pb=$1 mpirun=$2
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run=("$pb" run --backend cuda --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2"
     -n 3 -w 1 --min-time 0 --schedule 1f1b,gpipe --partition layer --microbatches 4
     --timeout 20 --out "$tmp/out")
start=$SECONDS
out=$("$mpirun" --oversubscribe -np 1 "${run[@]}" : -np 1 -x PPB_CUDAEMU_LOSE_AFTER=1100 "${run[@]}" 2>&1)
code=$? took=$((SECONDS - start))
echo "$out" | grep -E '^\[|CUDA|emulator'
echo "--- exit $code after $took s"
((code != 0)) || fail "the job exited 0 with a lost GPU"
((took < 60)) || fail "the job took $took s to end"
grep -qE '^\[1/2\] 1f1b x layer M=4 ' <<<"$out" || fail "the loss came before the first combination ended (launch counts changed?)"
grep -qE '^pipebench\[r1\]: CUDA error on GPU 0 \([0-9a-fA-F:.]+\) in ' <<<"$out" ||
  fail "no line naming rank 1 and its GPU"
[[ -s $tmp/out/1f1b__layer__P2_M4.json ]] || fail "the first combination's result is gone"
[[ ! -e $tmp/out/gpipe__layer__P2_M4.json ]] || fail "the lost combination wrote a result"
leftovers=$(find "$tmp/out" -type f ! -name '1f1b__layer__P2_M4.json')
[[ -z $leftovers ]] || fail "left behind: $leftovers"
before=$(md5sum <"$tmp/out/1f1b__layer__P2_M4.json")
out=$("$mpirun" --oversubscribe -np 2 "${run[@]}" --resume 2>&1) || fail "--resume failed: $out"
[[ -s $tmp/out/gpipe__layer__P2_M4.json ]] || fail "--resume did not write the lost combination"
[[ $(md5sum <"$tmp/out/1f1b__layer__P2_M4.json") == "$before" ]] || fail "--resume rewrote the first result"
echo "ok"
