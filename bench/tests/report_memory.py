#!/usr/bin/env python3
"""Memory of `pipebench report` on a large result file.

Writes a valid result of about SIZE MiB (bench/tests/data/result_ok.json with
M raised so that its timeline and theory timeline fill half of it, and as
many step-time samples as fill the other half), then reports it twice, each
in a child process whose peak resident memory (wait4's ru_maxrss) is bounded:
  * with --html --md --junit --csv: BASE + FACTOR x the file's size;
  * with --gbench, whose output holds one run per timed step (about 30 bytes
    of output per byte of samples): BASE + GBENCH_FACTOR x the file's size.
The bounds are generous (they catch memory growing faster than the input,
such as a tree per step per writer, not a few percent); the figures print.

usage: report_memory.py PIPEBENCH RESULT_OK WORKDIR [SIZE_MIB] [FACTOR] [GBENCH_FACTOR]
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

pb, base_result, work = sys.argv[1:4]
if os.environ.get("PPB_SANITIZED"):
    print("SKIP: built with -fsanitize=" + os.environ["PPB_SANITIZED"] + ": the sanitizer's shadow memory and "
          "quarantine inflate the peak RSS, so the bound is checked only by the unsanitized build")
    sys.exit(77)
size_mib = float(sys.argv[4]) if len(sys.argv) > 4 else 16
factor = float(sys.argv[5]) if len(sys.argv) > 5 else 16
gbench_factor = float(sys.argv[6]) if len(sys.argv) > 6 else 80
base_mib = 64

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
with open(base_result) as f:
    doc = json.load(f)
stages = doc["config"]["stages"]


def timeline(m, step):
    """1F1B-like events per stage: F then B for every micro-batch."""
    out = []
    for s in range(stages):
        t, events = 0.001 * s, []
        for mb in range(m):
            for op in ("F", "B"):
                events.append({"op": op, "mb": mb, "chunk": 0, "start": t, "end": t + step})
                t += step
        out.append(events)
    return out


# About 65 bytes per event, twice (measured and theory timelines), per
# stage: half the file; about 18 bytes per sample: the other half.
m = max(4, int(size_mib * 2**20 / 2 / (65 * 2 * 2 * stages)))
samples = [0.8 + 1e-9 * i for i in range(int(size_mib * 2**20 / 2 / 18))]
doc["config"]["microbatches"] = m
doc["timeline"] = timeline(m, 1e-4)
doc["metrics"]["theory"]["timeline"] = timeline(m, 1e-4)
doc["metrics"]["theory"]["peak_inflight_per_stage"] = [m] * stages
doc["metrics"]["step_time_seconds"]["samples"] = samples
path = os.path.join(work, "big.json")
with open(path, "w") as f:
    json.dump(doc, f, separators=(",", ":"))
size = os.path.getsize(path)

out = os.path.join(work, "out")
os.makedirs(out)


def report(outputs, bound_factor):
    args = [pb, "report", path, *outputs]
    start = time.monotonic()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    took = time.monotonic() - start
    err = child.stderr.read().decode()
    code = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss * 1024  # Linux: KiB
    bound = base_mib * 2**20 + bound_factor * size
    print(f"report {' '.join(outputs[::2])}: exit {code} in {took:.1f} s, peak RSS "
          f"{peak / 2**20:.0f} MiB = {peak / size:.1f} x the file (bound {bound / 2**20:.0f} MiB "
          f"= {base_mib:.0f} MiB + {bound_factor:.0f} x)")
    if code != 0:
        sys.exit(f"FAIL: report exited {code}\n{err}")
    if peak > bound:
        sys.exit("FAIL: peak memory over the bound")


print(f"result file {size / 2**20:.1f} MiB: M = {m} on {stages} stages, {len(samples)} steps")
report(["--html", f"{out}/r.html", "--md", f"{out}/r.md", "--junit", f"{out}/r.xml", "--csv",
        f"{out}/r.csv"], factor)
report(["--gbench", f"{out}/r.gbench.json"], gbench_factor)
print("ok")
