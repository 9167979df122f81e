#!/usr/bin/env python3
"""Checks metrics.cuda_graphs of every result file of a cuda-backend run.

usage: cuda_graphs_check.py DIR EXPECTED_REASON

Every result records --cuda-graphs (config.cuda_graphs) and how its units of
work reached the device: each action and each chunk's optimizer step of
every step (--check, warm-up, timed) on every rank counted exactly once,
all of them eager, for EXPECTED_REASON (the emulator refuses every capture).
Exit 0 when all hold, 1 with one line per failure.
"""
import json
import pathlib
import sys


def units_of_work(result):
    """Actions and optimizer steps the run executed, from its own record."""
    config = result["config"]
    steps = config["iters"] + config["warmup"] + (1 if config.get("check") else 0)
    per_step = sum(len(stage) for stage in result["timeline"])
    optimizer = config["stages"] * config["chunks"]  # one per chunk per step (sgd)
    return steps * (per_step + optimizer) * config.get("data_parallel", 1)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    folder, reason = pathlib.Path(sys.argv[1]), sys.argv[2]
    failures = []
    files = sorted(p for p in folder.glob("*.json") if not p.name.endswith(".trace.json"))
    results = []
    for path in files:
        doc = json.loads(path.read_text())
        if doc.get("schema") == "pipebench.result/1":
            results.append((path.name, doc))
    if not results:
        failures.append(f"{folder}: no result files")
    for name, r in results:
        if r["config"].get("cuda_graphs") != "on":
            failures.append(f"{name}: config.cuda_graphs is {r['config'].get('cuda_graphs')!r}, not 'on'")
        g = r.get("metrics", {}).get("cuda_graphs")
        if g is None:
            failures.append(f"{name}: no metrics.cuda_graphs")
            continue
        want = units_of_work(r)
        total = g["captured"] + g["replayed"] + g["rebuilt"] + g["eager"]
        if total != want or g["eager"] != want:
            failures.append(f"{name}: {g} counts {total} units of work, {g['eager']} eager; "
                            f"the run executed {want}, all eager")
        if g["eager_reason"] != reason:
            failures.append(f"{name}: eager_reason {g['eager_reason']!r}, expected {reason!r}")
    for f in failures:
        print(f)
    if not failures:
        print(f"{len(results)} results: every action and optimizer step eager ({reason})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
