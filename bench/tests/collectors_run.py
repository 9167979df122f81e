#!/usr/bin/env python3
"""Collectors through the real binary under mpirun (2 ranks).

unknown      `--profile nvtx,nosuch`: every rank exits 2, one line from rank 0
             names 'nosuch' and lists every collector `pipebench list` shows
             as available.
unavailable  a collector `pipebench list` marks as not available here, with
             cputime, over two combinations: the run completes (exit 0), rank 0
             warns exactly once, no other rank warns, and every result file
             carries cputime's figures (one per stage, one per timeline
             action) and none of the unavailable one. Skipped (exit 77) where
             every collector is available.

cupti        `--backend cpu --profile cupti,cputime`: completes; without a
             usable CUPTI rank 0 warns exactly once and no device figures
             appear, with one the device is idle (bubble 1.0 per stage) and
             the memory peaks say CUPTI was attached.

usage: collectors_run.py unknown|unavailable|cupti PIPEBENCH MPIEXEC OUTDIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

mode, pb, mpiexec, out = sys.argv[1:5]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")


def collectors():
    """(name, available) for each line of the collectors section of `pipebench list`."""
    text = subprocess.run([pb, "list"], capture_output=True, text=True, check=True).stdout
    section = text.split("collectors (--profile")[1].split("\n\n")[0]
    rows = [l for l in section.splitlines()[1:] if l.strip()]
    return [(l.split()[0], "[not available here" not in l) for l in rows]


def run(*args):
    p = subprocess.run([mpiexec, "-np", "2", pb, "run", *args], capture_output=True, text=True,
                       env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


def fail(why, output=""):
    sys.exit(f"FAIL: {why}\n--- output ---\n{output}")


known = collectors()
if not any(name == "nvtx" for name, _ in known) or not any(n == "cputime" for n, _ in known):
    fail(f"pipebench list does not show nvtx and cputime: {known}")

if mode == "unknown":
    code, text = run("--profile", "nvtx,nosuch", "--out", out)
    if code != 2:
        fail(f"exit code {code}, want 2", text)
    lines = [l for l in text.splitlines() if "unknown collector" in l]
    if len(lines) != 1:
        fail(f"want one line naming the collector, got {len(lines)}", text)
    if not lines[0].startswith("pipebench[r0]: --profile: unknown collector 'nosuch' (collectors: "):
        fail("the line is not rank 0's or does not name 'nosuch'", text)
    listed = re.search(r"\(collectors: ([^;)]*)", lines[0]).group(1).split(", ")
    available = [n for n, ok in known if ok]
    if listed != available:
        fail(f"lists {listed}, want the available collectors {available}", text)
    print(f"ok: {lines[0]}")
    sys.exit(0)

if mode == "cupti":
    # The device profiler with a backend that uses no GPU: where CUPTI cannot
    # start (no driver, no device, a build without CUPTI, another tool holds
    # it) rank 0 warns once and the run completes; where it can, the results
    # carry device figures of an idle device and say the memory was measured
    # with CUPTI attached.
    cupti = dict(known).get("cupti")
    if cupti is None:
        fail(f"pipebench list does not show cupti: {known}")
    shutil.rmtree(out, ignore_errors=True)
    code, text = run("--backend", "cpu", "--schedule", "gpipe,1f1b", "--partition", "layer",
                     "--microbatches", "4", "-n", "2", "-w", "1", "--profile", "cupti,cputime",
                     "--out", out)
    if code != 0:
        fail(f"exit code {code}, want 0 (--profile cupti must never fail the run)", text)
    warnings = [l for l in text.splitlines() if "--profile cupti: off" in l]
    files = sorted(glob.glob(f"{out}/*.json"))
    if len(files) != 2:
        fail(f"want 2 result files, got {files}", text)
    docs = [json.load(open(f)) for f in files]
    if not cupti:
        if len(warnings) != 1 or not warnings[0].startswith("pipebench[r0]: warning: "):
            fail(f"want exactly one warning from rank 0 about cupti, got {warnings}", text)
        for f, doc in zip(files, docs):
            m = doc["metrics"]
            if "device" in m or "cupti" in m.get("collectors", {}):
                fail(f"{f}: device figures from a collector that was off")
            if m["peak_memory_bytes"].get("device_profiler", "") != "":
                fail(f"{f}: memory marked as measured under a device profiler")
        print(f"ok: {warnings[0]}; the run completed ({len(files)} results)")
        sys.exit(0)
    if warnings:
        fail(f"cupti is available but warned: {warnings}", text)
    for f, doc in zip(files, docs):
        m = doc["metrics"]
        d = m.get("device")
        if d is None or d["profiler"] != "cupti":
            fail(f"{f}: no metrics.device from cupti")
        if d["bubble_ratio_per_stage"] != [1.0, 1.0] or any(d["compute_seconds_per_stage"]):
            fail(f"{f}: the cpu backend launches no kernels, got {d}")
        if m["peak_memory_bytes"]["device_profiler"] != "cupti":
            fail(f"{f}: memory not marked as measured with CUPTI attached")
    print(f"ok: cupti on beside the cpu backend: idle device, memory marked ({len(files)} results)")
    sys.exit(0)

off = [n for n, ok in known if not ok]
if not off:
    print("SKIP: every registered collector is available on this machine")
    sys.exit(77)
name = off[0]
shutil.rmtree(out, ignore_errors=True)
code, text = run("--backend", "timed", "--schedule", "gpipe,1f1b", "--partition", "layer",
                 "--microbatches", "4", "-n", "2", "-w", "1", "--profile", f"{name},cputime",
                 "--out", out)
if code != 0:
    fail(f"exit code {code}, want 0 (an unavailable collector must not fail the run)", text)
warnings = [l for l in text.splitlines() if f"--profile {name}: off" in l]
if len(warnings) != 1 or not warnings[0].startswith("pipebench[r0]: warning: "):
    fail(f"want exactly one warning from rank 0 about {name}, got {warnings}", text)
files = sorted(f for f in glob.glob(f"{out}/*.json"))
if len(files) != 2:
    fail(f"want 2 result files, got {files}", text)
for f in files:
    doc = json.load(open(f))
    cs = doc["metrics"].get("collectors", {})
    if name in cs or "cputime" not in cs:
        fail(f"{f}: metrics.collectors has {sorted(cs)}, want cputime only")
    step = cs["cputime"]["step"]["cpu_seconds"]
    actions = cs["cputime"]["action"]["cpu_seconds"]
    if len(step) != 2 or len(actions) != 2:
        fail(f"{f}: cputime figures are not one per stage")
    for s in range(2):
        if len(actions[s]) != len(doc["timeline"][s]):
            fail(f"{f}: stage {s}: {len(actions[s])} action figures, "
                 f"{len(doc['timeline'][s])} timeline actions")
        if any(a is None or a < 0 for a in actions[s]) or not step[s] > 0:
            fail(f"{f}: stage {s}: CPU seconds missing or negative")
        # The actions are disjoint parts of the step: their CPU cannot exceed it.
        if sum(actions[s]) > step[s] * 1.0001:
            fail(f"{f}: stage {s}: actions use {sum(actions[s])} CPU s, the step {step[s]}")
print(f"ok: {warnings[0]}; {len(files)} results with cputime figures")
