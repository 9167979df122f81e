#!/usr/bin/env bash
# ci/suite resolves every path it is given against the caller's folder,
# although it changes to the checkout: --regate DIR and --baseline DIR
# given as relative paths, from a folder outside the checkout, re-gate the
# results there (DIR/regate-<time>/ beside them) and nothing is created in
# the checkout. No sweep runs (--regate): a second or so.
# usage: suite_paths.sh PIPEBENCH RESULT.json
set -uo pipefail
pb=$(readlink -f "$1")
result=$(readlink -f "$2")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export PPB_PIPEBENCH=$pb
unset PPB_BASELINE PPB_RESULTS PPB_BUILD_DIR

mkdir -p "$tmp/r/cpu" "$tmp/base/nights/n1/cpu" "$tmp/base/nights/n2/cpu"
cp "$result" "$tmp/r/cpu/r.json"
cp "$result" "$tmp/base/nights/n1/cpu/r.json"
cp "$result" "$tmp/base/nights/n2/cpu/r.json"
[[ -e $root/r || -e $root/base ]] && { echo "SKIP: $root/r or $root/base exists already"; exit 77; }
(cd "$tmp" && "$root/ci/suite" --regate r --baseline base/nights) >"$tmp/log" 2>&1
code=$?
[[ -e $root/r || -e $root/base ]] && { rm -rf "$root/r"; fail "it wrote into the checkout ($root/r)"; }
((code == 0)) || fail "ci/suite --regate r --baseline base/nights: exit $code"$'\n'"$(tail -20 "$tmp/log")"
reports=("$tmp"/r/regate-*)
[[ -s ${reports[0]}/report.md ]] || fail "no report in $tmp/r/regate-*/"$'\n'"$(tail -20 "$tmp/log")"
grep -q "2 earlier night(s)" "${reports[0]}/report.md" "$tmp/log" ||
  fail "not gated against the two nights of base/nights"$'\n'"$(tail -20 "$tmp/log")"
echo "ok"
