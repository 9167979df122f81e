#!/usr/bin/env python3
"""`pipebench report` over real results of two models in one folder.

Runs two small models (2 and 3 layers) on 2 ranks, 1f1b and gpipe, on the
cpu and timed backends and, with `emulated`, on the cuda backend through
the CUDA emulator; reports the folder in every format and checks that:
  * each backend x model is one group with its own verdict, ranking only
    its own two combinations (samples/s are never compared across models);
  * every Markdown and HTML heading of a group names its model;
  * the CSV has a model column, every JUnit test case and every Google
    Benchmark name carries the model;
  * for the emulated cuda results the planner's line names the emulator as
    the GPU (not the host's CPUs) and says why it does not predict.

usage: report_models.py PIPEBENCH MPIEXEC WORKDIR [emulated]
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

pb, mpiexec, work = sys.argv[1:4]
emulated = len(sys.argv) > 4 and sys.argv[4] == "emulated"
models = ["gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2",
          "gpt:layers=3,hidden=32,heads=2,seq=16,vocab=64,mbs=2"]
backends = ["cpu", "timed"] + (["cuda"] if emulated else [])
if not emulated:
    print("note: no CUDA emulator in this build: cpu and timed results only")

shutil.rmtree(work, ignore_errors=True)
results = os.path.join(work, "results")
errors = []


def check(ok, what):
    if not ok:
        errors.append(what)


for backend in backends:
    for i, model in enumerate(models):
        cmd = [mpiexec, "-n", "2", "--oversubscribe", pb, "run", "--backend", backend, "--model",
               model, "-n", "1", "-w", "0", "--schedule", "1f1b,gpipe", "--partition", "layer",
               "--microbatches", "4", "--out", os.path.join(results, f"{backend}-{i}")]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited {run.returncode}:\n{run.stdout}{run.stderr}")

out = {k: os.path.join(work, "r." + k) for k in ("md", "html", "csv", "junit", "gbench")}
report = subprocess.run([pb, "report", results, "--md", out["md"], "--html", out["html"],
                         "--csv", out["csv"], "--junit", out["junit"], "--gbench", out["gbench"]],
                        capture_output=True, text=True, timeout=120)
print(report.stdout, end="")
if report.returncode != 0:
    sys.exit(f"FAIL: report exited {report.returncode}: {report.stderr}")


def model_of(text):
    """The models (by their layer count) a text names."""
    return set(re.findall(r"gpt:layers=(\d)", text))


# One verdict per backend x model, each of its own two combinations.
verdicts = [l for l in report.stdout.splitlines() if l.startswith("verdict (")]
check(len(verdicts) == 2 * len(backends), f"{len(verdicts)} verdicts, expected {2 * len(backends)}")
for v in verdicts:
    title = v[len("verdict ("):v.index("): ")]
    check(len(model_of(title)) == 1, f"verdict names not one model: {title}")
    check("(of 2 measured combinations)" in v, f"verdict ranks other than its 2 results: {v}")
    if ", cuda backend," in title:
        check("For this machine (1 x pipebench CUDA emulator (CPU)), the planner does not predict: "
              "the device table has no roofline for pipebench CUDA emulator (CPU)" in v,
              f"the cuda planner line does not name the emulator: {v}")
        check(" x cpu" not in v, f"the cuda planner line describes the host's CPUs: {v}")
# The best of each verdict is the fastest of that group's own results.
with open(out["csv"]) as f:
    rows = list(csv.DictReader(f))
check(len(rows) == 4 * len(backends), f"{len(rows)} CSV rows")
for v in verdicts:
    backend = re.search(r", (\w+) backend,", v).group(1)
    layers = model_of(v[:v.index("): ")]).pop()
    mine = [r for r in rows if r["backend"] == backend and f"layers={layers}," in r["model"]]
    best = max(mine, key=lambda r: float(r["samples_per_second"]))
    check(f"the best is {best['schedule']} x layer P=2 M=4: " in v,
          f"{backend} layers={layers}: best is not {best['schedule']}: {v}")
check({model_of(r["model"]).pop() for r in rows} == {"2", "3"}, "CSV model column")

with open(out["md"]) as f:
    md = f.read()
for h in re.findall(r"^#{2,3} (?:Verdict|Throughput|The documents' claims|Device activity)[^\n]*",
                    md, re.M):
    check(len(model_of(h)) == 1, f"Markdown heading without its model: {h}")
with open(out["html"]) as f:
    html = f.read()
heads = re.findall(r"<h[23]>(?:Measurements|Throughput|Memory per stage|Bubbles|Pipeline)[^<]*", html)
check(len(heads) >= 5 * 2 * len(backends), f"{len(heads)} HTML headings of groups")
for h in heads:
    check(len(model_of(h)) == 1, f"HTML heading without its model: {h}")
for t in re.findall(r"Samples per second \(median step[^)]*\)", html):
    check(len(model_of(t)) == 1, f"chart without its model: {t}")

cases = ET.parse(out["junit"]).getroot().iter("testcase")
for c in cases:
    check(len(model_of(c.get("name"))) == 1, f"JUnit case without its model: {c.get('name')}")
with open(out["gbench"]) as f:
    names = [b["name"] for b in json.load(f)["benchmarks"]]
for n in names:
    check(len(model_of(n)) == 1 and "/model:" in n, f"benchmark without its model: {n}")
aggregates = [n for n in names if n.endswith("_median")]
check(len(aggregates) == len(set(aggregates)) == 4 * len(backends), "benchmark names collide")

if errors:
    sys.exit("FAIL:\n  " + "\n  ".join(errors))
print(f"ok: {len(verdicts)} verdicts over {len(rows)} results of 2 models on {', '.join(backends)}")
