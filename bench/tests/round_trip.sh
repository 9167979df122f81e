#!/usr/bin/env bash
# A schedule printed as JSON, and as PyTorch's CSV, and read back by
# --schedule-file simulates to the same figures as the generated one, for
# every schedule (the CSV has no barrier: schedules with SYNC are refused).
set -euo pipefail
pb=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
costs=(--fwd 1 --bwd 2 --wgrad 1 --comm 0.1)
pick() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["step_time"], d["bubble_ratio"], [s["peak_inflight"] for s in d["stages"]])'; }
for s in gpipe 1f1b async-1f1b sync-1f1b hybrid adaptive pipedream interleaved-1f1b zb-h1 zb-h2 \
         zb-1p zb-2p zb-v dualpipe-v; do
  extra=()
  [[ $s == interleaved-1f1b ]] && extra=(--chunks 2)
  "$pb" schedule --name "$s" --stages 4 --microbatches 8 "${extra[@]}" "${costs[@]}" --format json >"$tmp/$s.json"
  a=$("$pb" simulate --schedule "$s" --stages 4 --microbatches 8 "${extra[@]}" "${costs[@]}" --format json)
  b=$("$pb" simulate --schedule-file "$tmp/$s.json" "${costs[@]}" --format json)
  fa=$(pick <<<"$a"); fb=$(pick <<<"$b")
  if [[ "$fa" != "$fb" ]]; then echo "$s: generated $fa, from file $fb"; exit 1; fi
  if "$pb" schedule --name "$s" --stages 4 --microbatches 8 "${extra[@]}" "${costs[@]}" \
       --format csv >"$tmp/$s.csv" 2>"$tmp/$s.err"; then
    c=$("$pb" simulate --schedule-file "$tmp/$s.csv" "${costs[@]}" --format json)
    fc=$(pick <<<"$c")
    if [[ "$fa" != "$fc" ]]; then echo "$s: generated $fa, from CSV $fc"; exit 1; fi
    echo "$s: $fa (json, csv)"
  else
    grep -q "SYNC barriers, which PyTorch's CSV cannot hold" "$tmp/$s.err" ||
      { echo "$s: --format csv failed: $(cat "$tmp/$s.err")"; exit 1; }
    echo "$s: $fa (json; no csv: SYNC)"
  fi
done
