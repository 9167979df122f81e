#!/usr/bin/env bash
# plan_from_cupti.sh PIPEBENCH OUT MODEL MPIRUN...
# Two cuda runs on the emulator, one device per rank, profiled with CUPTI;
# then `plan --validate` and `plan --calibration` on them must calibrate
# per unit kind from CUPTI's kernel times with a launch cost per action, and
# say so.
set -euo pipefail
pipebench=$1; out=$2; model=$3; shift 3
rm -rf "$out"
"$@" "$pipebench" run --backend cuda --model "$model" -n 2 -w 1 --schedule 1f1b,gpipe \
  --partition operator --microbatches 4 --profile cupti --out "$out" >/dev/null
validate=$("$pipebench" plan --validate "$out")
printf '%s\n' "$validate"
words='per unit kind from CUPTI on 2 results \(achieved / roofline\): embedding [0-9.e+-]+, .*; launch [0-9.e+-]+ us per action'
grep -Eq "^calibrated .*: $words" <<<"$validate" || { echo "FAIL: --validate names no calibration from CUPTI"; exit 1; }
plan=$("$pipebench" plan --model "$model" --gpus 2 --device cpu --top 1 --calibration "$out")
printf '%s\n' "$plan"
grep -Eq "^calibration: $words" <<<"$plan" || { echo "FAIL: the plan names no calibration from CUPTI"; exit 1; }
echo ok
