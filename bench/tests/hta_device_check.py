#!/usr/bin/env python3
"""Holistic Trace Analysis on the device tracks of pipebench's trace writer.

Reads the folders device_trace_fixture wrote (DIR/aware, DIR/nccl,
DIR/copies: per-rank
traces of a synthetic 4-stage GPU pipeline with kernel, stream and
correlation args, and expected.json with the device-activity module's
figures for the same records) and checks, per rank:

  * HTA finds every rank, every step (ProfilerStep#k) and, through
    args.correlation, assigns every action kernel to its step;
  * temporal breakdown: on `aware` (kernels of actions and the optimizer
    only), HTA's idle share equals pipebench's device bubble within 0.02;
    on `nccl`, HTA's idle + non-compute share does (NCCL receive kernels
    that spin through the bubble are busy for HTA, communication for
    pipebench), while HTA's idle share alone falls well below it; on
    `copies` (each action's own sub-microsecond copy in the idle launch
    gap, which HTA's own rounding of fractional times would make negative
    and its breakdown then fail on), HTA's idle + non-compute share does
    too (a copy is compute to pipebench, non-compute to HTA: 0.6 us an
    action);
  * on `aware`, HTA's compute time is pipebench's device busy time (the
    same union of intervals, each end of an event rounded to the nearest
    whole microsecond in the per-rank files);
  * idle-time analysis runs on every rank, and on `aware` (one stream) its
    idle time on the compute stream is the temporal breakdown's idle time.

The 0.02: HTA measures from a rank's first kernel to its last, pipebench
from each step's start to its end; over 20 steps the lead-in and tail of a
pipeline stage differ by less than b (1 - b) / (steps - b) ~ 0.01.

With --run, DIR is instead the output folder of a real run with
--profile cupti --trace (the cuda backend on a GPU or on the CUDA
emulator): for each result, HTA must find every rank and step, assign the
action kernels to their steps, and run its temporal breakdown (with compute
time on every rank) and idle-time analysis. Per rank it prints HTA's idle +
non-compute share (copies are non-compute to HTA) beside the result's device
bubble of that stage; with TOL, the two must be within it. They measure
different spans: the result's figure is its median step's, from the step's
start to its end; HTA's covers all the timed steps the trace lays end to
end, from the rank's first kernel to its last, so the later stages' lead-in
is outside it (b (1 - b) / (steps - b) of the share: 0.04 at b = 0.3 over 6
steps) and steps that differ (on the CUDA emulator a stage's device bubble
moves by +-0.03 from step to step) move the two apart. The synthetic
folders above hold the agreement to 0.02.

usage: hta_device_check.py DIR | --run DIR [TOL]   (exit 77 without the `hta` package)
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
TOLERANCE = 0.02


def fail(why):
    sys.exit(f"FAIL: {why}")


def load(folder, trace_dir, P, steps):
    """HTA on a per-rank trace folder: every rank, every step, and the
    action kernels (pipebench's own, "ppb_" in the name, the optimizer's
    excepted) each in its step through args.correlation."""
    t = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    ranks = sorted(t.t.traces.keys())
    if ranks != list(range(P)):
        fail(f"{folder}: HTA found ranks {ranks}, want 0..{P - 1}")
    sym = t.t.symbol_table.get_sym_table()
    for r in ranks:
        df = t.t.get_trace(r)
        gpu = df[df["stream"].ge(0)]
        cats = set(sym[c] for c in gpu["cat"].unique())
        if "kernel" not in cats:
            fail(f"{folder}: rank {r}: no kernel events (categories {cats})")
        names = gpu["name"].map(lambda i: sym[i])
        actions = gpu[names.str.contains("ppb_") & ~names.str.contains("ppb_sgd")]
        iterations = sorted(int(i) for i in actions["iteration"].unique())
        if iterations != list(range(steps)):
            fail(f"{folder}: rank {r}: action kernels in iterations {iterations}, "
                 f"want 0..{steps - 1} (args.correlation does not reach the actions)")
    return t, ranks


def check_run(directory, tolerance):
    results = [f for f in sorted(glob.glob(os.path.join(directory, "*.json")))
               if ".trace" not in os.path.basename(f)]
    checked = 0
    for path in results:
        r = json.load(open(path))
        if r.get("status") != "ok":
            continue
        device = r["metrics"].get("device")
        if not device:
            fail(f"{path}: no device figures (was it run with --profile cupti?)")
        P, steps = r["config"]["stages"], r["config"]["iters"]
        t, ranks = load(path, path[:-len(".json")] + ".trace", P, steps)
        breakdown = t.get_temporal_breakdown(visualize=False).set_index("rank")
        for rank in ranks:
            row = breakdown.loc[rank]
            span = float(row["kernel_time(us)"])
            share = (float(row["idle_time(us)"]) + float(row["non_compute_time(us)"])) / span
            bubble = device["bubble_ratio_per_stage"][rank]
            print(f"{os.path.basename(path)} rank {rank}: HTA idle + non-compute {share:.4f}; "
                  f"pipebench device bubble {bubble:.4f} (median step)")
            if not float(row["compute_time(us)"]) > 0:
                fail(f"{path}: rank {rank}: HTA found no compute time")
            if tolerance is not None and abs(share - bubble) > tolerance:
                fail(f"{path}: rank {rank}: HTA idle + non-compute share {share:.4f}, device "
                     f"bubble {bubble:.4f} (more than {tolerance} apart)")
            streams, _ = t.get_idle_time_breakdown(ranks=[rank], visualize=False)
            if streams.empty:
                fail(f"{path}: rank {rank}: idle-time analysis found no stream")
        checked += 1
    if checked == 0:
        fail(f"{directory}: no ok result to read")
    agrees = f", agreeing with pipebench's device bubble within {tolerance}" if tolerance else ""
    print(f"ok: Holistic Trace Analysis read {checked} results of {directory}{agrees}")
    sys.exit(0)


if sys.argv[1] == "--run":
    check_run(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None)
directory = sys.argv[1]

for scenario in ("aware", "nccl", "copies"):
    folder = os.path.join(directory, scenario)
    expected = json.load(open(os.path.join(folder, "expected.json")))
    P, steps = expected["stages"], expected["steps"]
    t, ranks = load(folder, os.path.join(folder, "run.trace"), P, steps)

    breakdown = t.get_temporal_breakdown(visualize=False).set_index("rank")
    idle_shares, bubbles = [], []
    for r in ranks:
        row = breakdown.loc[r]
        span = float(row["kernel_time(us)"])
        idle = float(row["idle_time(us)"]) / span
        non_compute = float(row["non_compute_time(us)"]) / span
        bubble = expected["device_bubble_per_stage"][r]
        compare = idle if scenario == "aware" else idle + non_compute
        what = "idle" if scenario == "aware" else "idle + non-compute"
        print(f"{scenario} rank {r}: HTA idle {idle:.4f}, non-compute {non_compute:.4f}; "
              f"pipebench device bubble {bubble:.4f}")
        if abs(compare - bubble) > TOLERANCE:
            fail(f"{folder}: rank {r}: HTA {what} share {compare:.4f}, "
                 f"device bubble {bubble:.4f} (more than {TOLERANCE} apart)")
        # Without NCCL every kernel is compute for HTA: its compute time is
        # pipebench's device busy time, the same union of intervals, but the
        # per-rank files round each end of an event to the nearest whole
        # microsecond (up to 1 us per event, either way).
        if scenario == "aware":
            ours = 1e6 * expected["busy_seconds_per_stage"][r]
            theirs = float(row["compute_time(us)"])
            events = int(t.t.get_trace(r)["stream"].ge(0).sum())
            if not abs(ours - theirs) <= events:
                fail(f"{folder}: rank {r}: HTA compute {theirs:.1f} us, pipebench device busy "
                     f"{ours:.1f} us ({events} events, up to 1 us of rounding each)")
        idle_shares.append(idle)
        bubbles.append(bubble)

        streams, _ = t.get_idle_time_breakdown(ranks=[r], visualize=False)
        if streams.empty:
            fail(f"{folder}: rank {r}: idle-time analysis found no stream")
        if scenario == "aware":
            on7 = float(streams[streams["stream"] == 7]["idle_time"].sum())
            if abs(on7 - float(row["idle_time(us)"])) > steps:
                fail(f"{folder}: rank {r}: idle-time analysis {on7:.1f} us on stream 7, "
                     f"temporal breakdown {float(row['idle_time(us)']):.1f} us")
    if scenario == "nccl":
        mean_idle = sum(idle_shares) / len(idle_shares)
        mean_bubble = sum(bubbles) / len(bubbles)
        if not mean_idle < mean_bubble - 0.05:
            fail(f"{folder}: HTA idle share {mean_idle:.4f} is not well below the device "
                 f"bubble {mean_bubble:.4f}: the receive kernels should hide it")
print(f"ok: Holistic Trace Analysis agrees with pipebench's device bubble "
      f"(within {TOLERANCE}) on {directory}/aware, {directory}/nccl and {directory}/copies")
