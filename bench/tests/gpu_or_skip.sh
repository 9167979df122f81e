#!/usr/bin/env bash
# gpu_or_skip.sh PIPEBENCH COMMAND...
# Runs COMMAND when `PIPEBENCH list` says the cuda backend is available here;
# otherwise prints why not and exits 77 (ctest's SKIP_RETURN_CODE), so a GPU
# test skips with the reason on a machine without a usable device.
set -u
pipebench=$1; shift
line=$("$pipebench" list | grep -E '^  cuda ')
if [[ $line == *"[not available here: "* ]]; then
  why=${line#*\[not available here: }
  echo "SKIP: no usable CUDA device: ${why%]}"
  exit 77
fi
exec "$@"
