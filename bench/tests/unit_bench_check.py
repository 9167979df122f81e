#!/usr/bin/env python3
"""unit_bench_check.py -- COMMAND...

Runs ppb_cuda_unit_bench (COMMAND, with --benchmark_format=json) and checks
its rows: exit 0; exactly one row per dtype (fp32, bf16) x unit kind x pass
the unit has (F for every kind, I for every kind but the embedding, W for
every kind but attention); each with at least one iteration, a positive
event time, positive flops and bytes per call, and FLOPs/s and bytes/s equal
to those over the row's mean time; the context naming what ran as `run`
does by default: the vocabulary padded to a multiple of 128, each dtype's
attention fused or naive with the reason; beside a fused attention, the
naive one's F and I rows. Exit 0 when all hold, else 1 with a line per failure."""
import json
import subprocess
import sys

KINDS = ("embedding", "ln1", "qkv", "attention", "attn_out", "ln2", "fc1_gelu", "fc2",
         "final_norm", "head")
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def expected_rows(fused):
    """The rows for the dtypes whose attention is fused (`fused`): each
    kind's passes, and beside a fused attention the naive one's F and I."""
    rows = set()
    for dtype in ("fp32", "bf16"):
        for kind in KINDS:
            for p in "FIW":
                if (kind, p) not in (("embedding", "I"), ("attention", "W")):
                    rows.add(f"{dtype}/{kind}/{p}")
        if dtype in fused:
            rows |= {f"{dtype}/attention_naive/F", f"{dtype}/attention_naive/I"}
    return rows


def check(doc):
    """The failures of a Google Benchmark JSON document, one line each."""
    bad = []
    seen = {}
    for b in doc.get("benchmarks", []):
        name = b.get("run_name", b.get("name", "?")).removesuffix("/manual_time")
        seen[name] = seen.get(name, 0) + 1
        if b.get("error_occurred"):
            bad.append(f"{name}: error: {b.get('error_message')}")
            continue
        seconds = b.get("real_time", 0) * UNITS.get(b.get("time_unit"), 0)
        if b.get("iterations", 0) < 1 or seconds <= 0:
            bad.append(f"{name}: {b.get('iterations')} iterations, {seconds} s per iteration")
            continue
        for count, rate in (("flops", "FLOPs/s"), ("bytes", "bytes/s")):
            per_call = b.get(count, 0)
            if per_call <= 0:
                bad.append(f"{name}: {count} {per_call}, want > 0")
            elif abs(b.get(rate, 0) - per_call / seconds) > 1e-6 * per_call / seconds:
                bad.append(f"{name}: {rate} {b.get(rate)}, want {count} / time = "
                           f"{per_call / seconds}")
    ctx = doc.get("context", {})
    padded = str(ctx.get("padded_vocab", ""))
    if not padded.isdigit() or int(padded) % 128:
        bad.append(f"context: padded_vocab {padded!r}, want a multiple of 128")
    fused = set()
    for dtype in ("fp32", "bf16"):
        form = str(ctx.get(f"attention_{dtype}", ""))
        if form == "fused":
            fused.add(dtype)
        elif not (form.startswith("naive: ") and len(form) > 7):
            bad.append(f"context: attention_{dtype} {form!r}, want fused or naive: <why>")
    want = expected_rows(fused)
    bad += [f"{n}: missing" for n in sorted(want - seen.keys())]
    bad += [f"{n}: not a unit kind x pass row" for n in sorted(seen.keys() - want)]
    bad += [f"{n}: {k} rows" for n, k in sorted(seen.items()) if k > 1]
    return bad


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    proc = subprocess.run(argv[2:], capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        print(f"FAIL: exit code {proc.returncode}: {proc.stderr.strip()}")
        return 1
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        print(f"FAIL: stdout is not JSON: {e}")
        return 1
    bad = check(doc)
    for line in bad:
        print("FAIL:", line)
    if bad:
        return 1
    print(f"ok: {len(doc['benchmarks'])} rows, every dtype x unit kind x pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
