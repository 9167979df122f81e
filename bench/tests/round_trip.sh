#!/usr/bin/env bash
# A schedule printed as JSON and read back by --schedule-file simulates to
# the same figures as the generated one, for every schedule.
set -euo pipefail
pb=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for s in gpipe 1f1b async-1f1b sync-1f1b hybrid adaptive pipedream interleaved-1f1b zb-h1 zb-h2; do
  extra=()
  [[ $s == interleaved-1f1b ]] && extra=(--chunks 2)
  "$pb" schedule --name "$s" --stages 4 --microbatches 8 "${extra[@]}" --format json >"$tmp/$s.json"
  a=$("$pb" simulate --schedule "$s" --stages 4 --microbatches 8 "${extra[@]}" --fwd 1 --bwd 2 --wgrad 1 --comm 0.1 --format json)
  b=$("$pb" simulate --schedule-file "$tmp/$s.json" --fwd 1 --bwd 2 --wgrad 1 --comm 0.1 --format json)
  pick() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["step_time"], d["bubble_ratio"], [s["peak_inflight"] for s in d["stages"]])'; }
  fa=$(pick <<<"$a"); fb=$(pick <<<"$b")
  if [[ "$fa" != "$fb" ]]; then echo "$s: generated $fa, from file $fb"; exit 1; fi
  echo "$s: $fa"
done
