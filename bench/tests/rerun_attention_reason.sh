#!/usr/bin/env bash
# --rerun of a result that ran naive for a reason of its node (here, a
# refusal by cuDNN written into the result, as cuDNN's trial build records
# one on a GPU) runs naive again and records that reason, where this node
# (the CUDA emulator: fp32, pipebench's own fused kernels) has none of its
# own; a result asked naive records "--attention naive" again.
# usage: rerun_attention_reason.sh PIPEBENCH MPIEXEC   (the emulator first on LD_LIBRARY_PATH)
set -uo pipefail
pb=$1 mpiexec=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
reason="cuDNN 9.19.0 cannot build its bf16 flash attention for this shape (written by the test)"
run() { "$mpiexec" -np 2 --oversubscribe "$pb" run "$@" 2>&1 | tail -3; }
field() { python3 -c "import glob,json,sys; d=json.load(open(glob.glob(sys.argv[1]+'/*.json')[0])); print(d['config']['attention'] + ' | ' + str(d['config'].get('attention_reason')))" "$1"; }
run --backend cuda --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2" -n 1 -w 0 \
  --schedule 1f1b --partition layer --microbatches 4 --attention naive --out "$tmp/asked"
[[ $(field "$tmp/asked") == "naive | --attention naive" ]] || fail "asked naive: $(field "$tmp/asked")"
cp -r "$tmp/asked" "$tmp/refused"
python3 - "$tmp/refused" "$reason" <<'PY'
import glob, json, sys
path = glob.glob(sys.argv[1] + "/*.json")[0]
doc = json.load(open(path))
doc["config"]["attention_reason"] = sys.argv[2]
json.dump(doc, open(path, "w"))
PY
run --rerun "$tmp/refused" --out "$tmp/refused-again"
[[ $(field "$tmp/refused-again") == "naive | $reason" ]] ||
  fail "the rerun of the refused result: $(field "$tmp/refused-again")"
run --rerun "$tmp/asked" --out "$tmp/asked-again"
[[ $(field "$tmp/asked-again") == "naive | --attention naive" ]] ||
  fail "the rerun of the asked result: $(field "$tmp/asked-again")"
echo "ok: naive reruns keep their recorded reasons"
