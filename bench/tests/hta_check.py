#!/usr/bin/env python3
"""Holistic Trace Analysis reads the per-rank traces of a real run.

For every result file of DIR with a trace folder (<combination>.trace/, one
rank<r>.json per rank), loads the folder with hta.TraceAnalysis and checks
that it finds every rank (0..P-1) and, on each rank, every measured step
(iterations 0..iters-1, from the "ProfilerStep#<k>" slices). Then recomputes
the bubble ratio from HTA's own dataframe: per rank and iteration, step
length minus the summed forward/backward/wgrad durations, over the step
length; the mean over ranks of the median step must equal the result file's
metrics.bubble_ratio.measured (HTA keeps microseconds: within 1e-3).

usage: hta_check.py DIR   (run with the Python that has `hta`; exit 77 when
it has not: ci/setup-deps installs it)
"""
import glob
import json
import logging
import os
import sys

try:
    from hta.trace_analysis import TraceAnalysis
except ImportError as e:
    print(f"SKIP: Holistic Trace Analysis is not installed for {sys.executable} ({e}); "
          "run ci/setup-deps")
    sys.exit(77)

logging.disable(logging.WARNING)
directory = sys.argv[1]
results = sorted(f for f in glob.glob(f"{directory}/*.json") if not f.endswith(".trace.json"))
if not results:
    sys.exit(f"FAIL: no result files in {directory}")
COMPUTE = {"forward", "backward", "wgrad"}
checked = 0
for path in results:
    doc = json.load(open(path))
    if doc["status"] != "ok":
        continue
    folder = path[:-len(".json")] + ".trace"
    if not os.path.isdir(folder):
        sys.exit(f"FAIL: {path}: no per-rank trace folder {folder}")
    P, iters = doc["config"]["stages"], doc["config"]["iters"]
    t = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
    ranks = sorted(t.t.traces.keys())
    if ranks != list(range(P)):
        sys.exit(f"FAIL: {folder}: HTA found ranks {ranks}, want 0..{P - 1}")
    sym = t.t.symbol_table.get_sym_table()
    steps = doc["metrics"]["step_time_seconds"]["samples"]
    median = doc["metrics"]["step_time_seconds"]["median"]
    k_med = min(range(len(steps)), key=lambda k: abs(steps[k] - median))
    ratios = []
    for r in ranks:
        df = t.t.get_trace(r)
        names = df["name"].map(lambda i: sym[i])
        cats = df["cat"].map(lambda i: sym[i])
        iterations = sorted(int(i) for i in df["iteration"].unique() if i >= 0)
        if iterations != list(range(iters)):
            sys.exit(f"FAIL: {folder}: rank {r}: HTA found iterations {iterations}, "
                     f"want 0..{iters - 1}")
        step = df[names.str.startswith("ProfilerStep#") & (df["iteration"] == k_med)]
        if len(step) != 1:
            sys.exit(f"FAIL: {folder}: rank {r}: {len(step)} ProfilerStep#{k_med} slices")
        length = float(step["dur"].iloc[0])
        busy = float(df[cats.isin(COMPUTE) & (df["iteration"] == k_med)]["dur"].sum())
        ratios.append((length - busy) / length)
    hta_bubble = sum(ratios) / len(ratios)
    measured = doc["metrics"]["bubble_ratio"]["measured"]
    if abs(hta_bubble - measured) > 1e-3:
        sys.exit(f"FAIL: {path}: bubble from HTA's dataframe {hta_bubble:.5f}, "
                 f"result file {measured:.5f}")
    print(f"{os.path.basename(path)}: HTA: ranks {ranks}, iterations 0..{iters - 1}, "
          f"bubble {hta_bubble:.4f} (result {measured:.4f})")
    checked += 1
if checked == 0:
    sys.exit(f"FAIL: no ok result with a trace in {directory}")
print(f"ok: {checked} combinations read by Holistic Trace Analysis")
