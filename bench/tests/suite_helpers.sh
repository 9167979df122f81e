# Sourced by the tests that run ci/suite (suite_e2e.sh, suite_cuda_e2e.sh).
# They set $root (the repository), $tmp (a scratch folder) and fail().

# check NAME WHAT CONDITION...: fails naming WHAT unless CONDITION holds;
# skipped instead when the gate did not judge some timings of NAME (a busy
# host, or a cpu rank's machine at another speed): the test checks verdicts,
# and there was none. A wrong verdict still fails.
check() {
  local name=$1 what=$2 why; shift 2
  "$@" && return 0
  why=$(grep -o "the host was busy[^;]*\|the machine itself ran[^;]*" "$tmp/$name.log" | head -1)
  if [[ -n $why ]]; then
    echo "SKIP: $name: the gate did not judge some timings ($why)"
    exit 77
  fi
  fail "$name: $what"$'\n'"$(tail -40 "$tmp/$name.log")"
}

# suite NAME WANT_EXIT ARG...: ci/suite ARG... with its log in $tmp/NAME.log;
# prints the log's lines that match $suite_show (an extended regex).
suite_show='^(suite: confirming|gate|  REGRESSION|  IMPROVEMENT|  UNDECIDABLE)'
suite() {
  local name=$1 want=$2 code; shift 2
  "$root/ci/suite" "$@" >"$tmp/$name.log" 2>&1
  code=$?
  echo "--- $name: ci/suite $* -> exit $code"
  grep -E "$suite_show" "$tmp/$name.log"
  check "$name" "exit $code, want $want" test "$code" -eq "$want"
}
