#!/usr/bin/env bash
# expect_usage_error.sh REGEX CMD [ARGS...]
# Passes when CMD exits with 2 within 20 s and its stderr is exactly one line
# matching the extended REGEX, with nothing else on stderr (the one-line
# error contract for bad input).
set -u
regex=$1; shift
err=$(mktemp); out=$(mktemp)
trap 'rm -f "$err" "$out"' EXIT
timeout --kill-after=5 20 "$@" >"$out" 2>"$err"
got=$?
lines=$(grep -c '' "$err")
fail=0
if [[ $got -ne 2 ]]; then echo "exit code: want 2, got $got"; fail=1; fi
if [[ $lines -ne 1 ]]; then echo "stderr: want exactly 1 line, got $lines"; fail=1; fi
if ! grep -Eq -- "$regex" "$err"; then echo "stderr does not match /$regex/"; fail=1; fi
if [[ $fail -ne 0 ]]; then
  echo "--- command: $*"; echo "--- stderr:"; cat "$err"; echo "--- stdout (head):"; head -5 "$out"
  exit 1
fi
echo "ok: exit $got: $(cat "$err")"
