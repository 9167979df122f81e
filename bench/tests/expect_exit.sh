#!/usr/bin/env bash
# expect_exit.sh CODE SECONDS REGEX -- COMMAND...
# Runs COMMAND, and passes when it exits with CODE within SECONDS and its
# output (stdout + stderr) matches the extended regular expression REGEX.
# For the failure cases of `pipebench run`.
set -u
want=$1; limit=$2; regex=$3; shift 4
start=$(date +%s%N)
out=$(timeout --kill-after=5 "$limit" "$@" 2>&1)
code=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s\n' "$out"
echo "--- exit code $code after ${took} ms (want $want within ${limit}s)"
if [[ $code -eq 124 || $code -eq 137 ]]; then echo "FAIL: did not finish within ${limit}s"; exit 1; fi
if [[ $code -ne $want ]]; then echo "FAIL: exit code $code, want $want"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$out"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
echo "ok"
