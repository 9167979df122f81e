#!/usr/bin/env python3
"""`pipebench plan` through the real command: the JSON shape other tools read
(pipebench.plan/1, fitting candidates best first, every key of a candidate),
the winner's predicted trace (one process per stage), the text table with its
reasons, and the advice when nothing fits (exit 0, no candidate fits), and --validate's JSON on a lone result.

usage: plan_run.py PIPEBENCH WORKDIR
"""
import json
import os
import subprocess
import sys

pb, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL", what)


base = [pb, "plan", "--gpus", "4", "--gpus-per-node", "2", "--model", "gpt-tiny",
        "--device", "cpu", "--gpu-memory", "1GiB", "--global-batch", "16", "--top", "3"]
trace = os.path.join(work, "winner.trace.json")
out = subprocess.run(base + ["--format", "json", "--trace", trace], capture_output=True,
                     text=True)
check(out.returncode == 0, f"json run exit {out.returncode}: {out.stderr}")
doc = json.loads(out.stdout)
check(doc["schema"] == "pipebench.plan/1", "schema")
check(doc["cluster"]["gpus"] == 4 and doc["cluster"]["gpus_per_node"] == 2, "cluster echoed")
check(doc["model"] == "gpt-tiny", "model echoed")
cands = doc["candidates"]
keys = {"schedule", "partition", "same_cut", "stages", "data_parallel", "microbatches",
        "micro_batch_size", "chunks", "inflight", "samples_per_second", "bubble_ratio",
        "peak_memory_bytes", "fits", "why"}
for c in cands:
    check(keys <= set(c), f"candidate keys missing: {keys - set(c)}")
    check(len(c["peak_memory_bytes"]) == c["stages"], "one peak per stage")
    check(c["stages"] * c["data_parallel"] == 4, "P x DP = GPUs")
    check(c["why"] != "", "a reason for every candidate")
    check(isinstance(c["same_cut"], list) and c["partition"] not in c["same_cut"],
          f"same_cut names the other partitions of the cut: {c['same_cut']}")
fitting = [c for c in cands[:3] if c["fits"]]
check(len(fitting) == 3, "three leaders fit")
sps = [c["samples_per_second"] for c in fitting]
check(sps == sorted(sps, reverse=True), f"leaders best first: {sps}")
for c in fitting:
    check(max(c["peak_memory_bytes"]) <= doc["capacity_bytes"], "leaders within the capacity")
check(doc["capacity_bytes"] == int(0.85 * (1 << 30)), "85% guard of 1 GiB")

with open(trace) as f:
    events = json.load(f)["traceEvents"]
pids = {e["pid"] for e in events}
check(len(pids) == cands[0]["stages"], f"trace: {len(pids)} processes for {cands[0]['stages']} stages")

text = subprocess.run(base, capture_output=True, text=True)
check(text.returncode == 0, f"text run exit {text.returncode}")
check("samples/s" in text.stdout and "why:" in text.stdout and "1. fastest" in text.stdout,
      "text table with reasons:\n" + text.stdout)

tight = subprocess.run(base[:-6] + ["--gpu-memory", "1MiB", "--format", "json"],
                       capture_output=True, text=True)
check(tight.returncode == 0, f"nothing fits still exits 0: {tight.returncode} {tight.stderr}")
tdoc = json.loads(tight.stdout)
check(not any(c["fits"] for c in tdoc["candidates"]), "nothing fits 1 MiB")
check("nothing fits" in tdoc["advice"] and "would fit with GPUs of" in tdoc["advice"],
      "advice: " + tdoc["advice"])

# A manual cut keeps its ranges (split at their comma by the list, joined
# again), and a name given twice is searched once. gpt-tiny's 59 units in 2
# parts: only P=2 places them.
manual = "manual:0-30,31-58"
named = subprocess.run(base[:-2] + ["--top", "50", "--partition", "operator," + manual +
                                    ",operator", "--format", "json"],
                       capture_output=True, text=True)
check(named.returncode == 0, f"--partition with a manual cut: exit {named.returncode} "
      f"{named.stderr}")
if named.returncode == 0:
    ndoc = json.loads(named.stdout)
    parts = {c["partition"] for c in ndoc["candidates"] if c["stages"] > 1}
    check(parts <= {"operator", manual} and manual in parts | {
        p for c in ndoc["candidates"] for p in c["same_cut"]},
          f"the manual cut is searched whole: {parts}")
    for c in ndoc["candidates"]:
        check(c["partition"] not in c["same_cut"] and len(set(c["same_cut"])) == len(c["same_cut"]),
              f"each name once: {c['partition']} {c['same_cut']}")

# --validate on one result: nothing to calibrate it on, said so, exit 0.
one = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "result_ok.json")
val = subprocess.run([pb, "plan", "--validate", one, "--format", "json"], capture_output=True,
                     text=True)
check(val.returncode == 0, f"--validate exit {val.returncode}: {val.stderr}")
vdoc = json.loads(val.stdout)
check(vdoc["schema"] == "pipebench.plan-validation/1", "validation schema")
check(vdoc["combinations"] == [] and len(vdoc["skipped"]) == 1, f"one result skipped: {vdoc}")

print(f"plan: {len(cands)} candidates, leader {cands[0]['schedule']} {cands[0]['partition']} "
      f"P={cands[0]['stages']} x DP={cands[0]['data_parallel']} M={cands[0]['microbatches']} "
      f"mbs={cands[0]['micro_batch_size']}: {cands[0]['samples_per_second']:.1f} samples/s")
sys.exit(1 if failures else 0)
