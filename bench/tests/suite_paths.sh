#!/usr/bin/env bash
# ci/suite resolves every path it is given against the caller's folder,
# although it changes to the checkout: --regate DIR and --baseline DIR
# given as relative paths, from a folder outside the checkout, re-gate the
# results there (DIR/regate-<time>/ beside them) and nothing is created in
# the checkout; a link planted where the suite writes its report is refused,
# never followed. No sweep runs (--regate): two seconds or so.
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
# A link planted where the suite writes a report is refused (exit 2, naming
# it), never followed: the report folder is named by the second the suite
# starts, so a link waits in each of the next 20 seconds' folders.
echo keep >"$tmp/target"
touch -d @1000000000 "$tmp/target"
now=$(date -u +%s)
for s in $(seq "$now" $((now + 20))); do
  d=$tmp/r/regate-$(date -u -d "@$s" +%Y%m%dT%H%M%SZ)
  mkdir -p "$d" && ln -sfn "$tmp/target" "$d/report.md"
done
out=$(cd "$tmp" && "$root/ci/suite" --regate r --baseline base/nights 2>&1 >/dev/null)
code=$?
((code == 2)) || fail "a link at regate-*/report.md: exit $code, want 2: $out"
[[ $out == *"report.md: a symbolic link inside the suite's folder"* ]] ||
  fail "a link at regate-*/report.md: said '$out'"
[[ $(cat "$tmp/target") == keep && $(stat -c %Y "$tmp/target") == 1000000000 ]] ||
  fail "the link's target was written"
echo "ok"
