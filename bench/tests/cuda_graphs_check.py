#!/usr/bin/env python3
"""Checks metrics.cuda_graphs of every result file of a cuda-backend run.

usage: cuda_graphs_check.py DIR [EXPECTED_REASON]

Every result records --cuda-graphs (config.cuda_graphs) and how its units of
work reached the device, each action and each chunk's optimizer step of
every step (--check, warm-up, timed) on every rank counted exactly once:
each chunk's optimizer step captured into a graph at its first step and
replayed at every later one; each action eager in the first step (which
sizes the chunks' static buffers), captured in the second and replayed in
every later one (nothing moves: nothing rebuilt); eager_reason is
EXPECTED_REASON (default "": the first step's eager work is no fallback).
Where a result has its trace (NAME.trace.json), the replays ran: each
rank's timed steps show its update kernels (ppb_sgd), the same number in
every step.
Exit 0 when all hold, 1 with one line per failure.
"""
import json
import pathlib
import sys


def expected_counts(result):
    """captured, replayed, rebuilt, eager: from the run's own record."""
    config = result["config"]
    steps = config["iters"] + config["warmup"] + (1 if config.get("check") else 0)
    actions = sum(len(stage) for stage in result["timeline"])
    replicas = config.get("data_parallel", 1)
    chunks = config["stages"] * config["chunks"] * replicas  # one optimizer step each per step
    actions *= replicas
    if steps < 2:
        return {"captured": chunks, "replayed": 0, "rebuilt": 0, "eager": actions}
    return {"captured": chunks + actions, "replayed": (steps - 1) * chunks + (steps - 2) * actions,
            "rebuilt": 0, "eager": actions}


def replayed_updates(name, result, trace_path):
    """Failures of the trace's update kernels: each rank some, as many per timed step."""
    trace = json.loads(trace_path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    per_rank = {rank: 0 for rank in range(result["config"]["stages"])}
    for e in events:
        if e.get("cat") == "kernel" and "ppb_sgd" in e.get("name", ""):
            per_rank[e["pid"]] = per_rank.get(e["pid"], 0) + 1
    iters = result["config"]["iters"]
    return [f"{name}: rank {rank}'s trace has {n} update kernels over {iters} timed steps"
            for rank, n in sorted(per_rank.items()) if n == 0 or n % iters != 0]


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    folder = pathlib.Path(sys.argv[1])
    reason = sys.argv[2] if len(sys.argv) == 3 else ""
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
        want = expected_counts(r)
        got = {k: g[k] for k in want}
        if got != want:
            failures.append(f"{name}: counts {got}, expected {want}")
        trace = folder / (name[: -len(".json")] + ".trace.json")
        if trace.exists():
            failures += replayed_updates(name, r, trace)
        if g["eager_reason"] != reason:
            failures.append(f"{name}: eager_reason {g['eager_reason']!r}, expected {reason!r}")
    for f in failures:
        print(f)
    if not failures:
        print(f"{len(results)} results: each optimizer step captured once and replayed, "
              f"each action eager in the sizing step, then captured once and replayed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
