#!/usr/bin/env bash
# Runs `pipebench run --profile nvtx` on 2 ranks with the NVTX recorder
# injected (as Nsight Systems injects itself) and checks the ranges.
# usage: nvtx_run.sh PIPEBENCH RECORDER_SO MPIEXEC
set -euo pipefail
pb=$1; recorder=$2; mpiexec=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$mpiexec" -np 2 -x NVTX_INJECTION64_PATH="$recorder" -x PPB_NVTX_RECORD="$tmp/nvtx.%p" \
  "$pb" run --backend timed --model gpt-tiny --schedule gpipe --partition layer --microbatches 4 \
  --warmup 1 --iters 2 --time-scale 20 --profile nvtx --out "$tmp/out"
python3 "$here/nvtx_run_check.py" "$tmp" 2 4 1 2
