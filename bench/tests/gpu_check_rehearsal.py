#!/usr/bin/env python3
"""ci/gpu-check rehearsed where there is no GPU, on this build tree, two
schedules, in one of two modes; it asserts on the summary the program writes
for machines ($OUT/gpu-check.json), and that the one for people says the same:
  cpu       the cpu backend stands in (PPB_GPU_CHECK_BACKEND=cpu): the gpu
            tests (every gpu-labelled test of the build run, none failed),
            sweeps on 2 and 4 ranks with --check, --profile nvtx,cupti and
            --trace (6 checked runs each), the memory step (12 combinations)
            and 2 stages x 2 replicas PASS with their figures; the
            device-only steps SKIP saying why; nothing FAILs or is CUT;
            OUT holds the summary and the archive of the work folder
            alone, and the archive has the logs and results, not the
            sweeps' traces.
  emulated  the cuda backend itself on the CUDA emulator
            (PPB_GPU_CHECK_EMULATED=BUILD_DIR/cudaemu, a small model): the
            sweeps (with CUPTI's device bubble beside the events' for every
            run), memory, dp, p2p 2rank and cupti cost steps PASS as they
            would on a GPU and name the emulator as the device, the sweeps
            and dp with the fast paths every result recorded; the steps
            that need NVIDIA's own libraries SKIP saying why.
In both the nights step is not selected (SKIP saying so: it runs only when
PPB_GPU_CHECK_STEPS names it).
usage: gpu_check_rehearsal.py BUILD_DIR [cpu|emulated]
"""
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def run_check(tmp, build, **settings):
    # The check's budget stays below the test's TIMEOUT (300 s): on a host
    # too busy for it the summary says which step the budget cut.
    env = dict(os.environ, OUT=str(tmp / "out"), PPB_GPU_CHECK_WORK=str(tmp / "work"),
               PPB_GPU_CHECK_BUILD=str(build), PPB_GPU_CHECK_SCHEDULES="1f1b,zb-v",
               PPB_GPU_CHECK_SECONDS="270")
    env.update(settings)
    sys.stdout.flush()
    p = subprocess.run(["bash", str(ROOT / "ci" / "gpu-check")], env=env)  # its lines as they come
    text_path, json_path = tmp / "out" / "gpu-check.txt", tmp / "out" / "gpu-check.json"
    if not json_path.is_file() or not text_path.is_file():
        fail("no summary in %s" % (tmp / "out"))
    text = text_path.read_text()
    doc = json.loads(json_path.read_text())
    if doc["schema"] != "pipebench.gpu-check/1":
        fail("schema %s" % doc["schema"])
    if p.returncode != 0:
        fail("ci/gpu-check exited %d" % p.returncode)
    if doc["result"] != "passed" or "RESULT: passed" not in text:
        fail("result %s" % doc["result"])
    steps = {}
    for s in doc["steps"]:
        if s["status"] in ("FAIL", "CUT"):
            fail("step %s: %s %s" % (s["name"], s["status"], s["figures"]))
        # The text for people is the JSON's line, status and name in columns.
        if "%-5s %-11s %s" % (s["status"], s["name"], s["figures"]) not in text.splitlines():
            fail("step %s: its line is not in gpu-check.txt" % s["name"])
        steps.setdefault(s["name"], s)
    return steps


def expect(steps, status, names):
    for n in names:
        s = steps.get(n)
        if s is None or s["status"] != status:
            fail("step %s: %s, expected %s" % (n, s and s["status"], status))
        if status == "SKIP" and len(s["figures"]) < 10:
            fail("step %s skipped without a reason" % n)


def not_selected(steps):
    # The nights take a lease of their own: only PPB_GPU_CHECK_STEPS runs them.
    s = steps.get("nights")
    if s is None or (s["status"], s["figures"]) != ("SKIP", "not selected (PPB_GPU_CHECK_STEPS)"):
        fail("nights: %s, expected SKIP not selected" % (s and (s["status"], s["figures"])))


def checked_runs(step, n=None):
    v = step["values"]
    if v["not_ok"] or v["checks_failed"] or v["checks"] != v["ok"] or v["ok"] < 1:
        fail("%s: %s" % (step["name"], step["figures"]))
    if n is not None and v["ok"] != n:
        fail("%s: %d checked runs, expected %d" % (step["name"], v["ok"], n))


def fast_paths(step):
    """The cuda backend's fast paths are in the step's line, from every ok
    result: GEMM epilogues, CUDA graphs (units of work, no eager reason)
    and --check's optimizer-update error."""
    v = step["values"]
    e, g, u = v.get("gemm_epilogues"), v.get("cuda_graphs"), v.get("update_rel_error")
    if not (e and g and u) or {e["recorded"], g["recorded"], u["recorded"]} != {v["ok"]}:
        fail("%s: fast paths not recorded by every result: %s" % (step["name"], step["figures"]))
    # The emulator captures every action and replays it after the first step,
    # whose eager work (it sizes the static buffers) is no fallback.
    if e["fused"] < 1 or g["captured"] < 1 or g["replayed"] < 1 or g["eager_reasons"]:
        fail("%s: fast paths %s %s" % (step["name"], e, g))
    for text in ("; GEMM epilogues %d fused, %d refused" % (e["fused"], e["refused"]),
                 "; CUDA graphs %d captured, %d replayed, %d rebuilt, %d eager" % (
                     g["captured"], g["replayed"], g["rebuilt"], g["eager"]),
                 "; optimizer update max rel err %.1e (%s)" % (u["max"], u["max_at"])):
        if text not in step["figures"]:
            fail("%s: %r not in its line: %s" % (step["name"], text, step["figures"]))


def emulated(tmp, build):
    steps = run_check(tmp, build, PPB_GPU_CHECK_EMULATED=str(build / "cudaemu"),
                      PPB_GPU_CHECK_SCHEDULES="1f1b",
                      PPB_GPU_CHECK_MODEL="gpt:layers=4,hidden=32,heads=2,seq=16,vocab=64,mbs=2")
    expect(steps, "PASS", ["sweep P=2", "sweep P=4", "memory", "dp", "p2p 2rank", "cupti cost"])
    for p in (2, 4):
        s = steps["sweep P=%d" % p]
        checked_runs(s)
        # CUPTI (the emulator's) recorded every run: its device bubble is
        # there beside the events' for each, on the emulated device. How
        # close the two are is a timing of the emulator on a shared CPU
        # (ci/gpu-check judges it on a GPU), so it is not asserted here.
        d = s["values"].get("device_bubble") or {}
        if d.get("of") != s["values"]["ok"] or not math.isfinite(d.get("max_abs_diff", math.nan)):
            fail("%s: device bubble %s" % (s["name"], d))
        if s["values"].get("device") != "pipebench CUDA emulator (CPU)":
            fail("%s ran on %s" % (s["name"], s["values"].get("device")))
        fast_paths(s)
    checked_runs(steps["dp"], 2)
    fast_paths(steps["dp"])
    if len(steps["cupti cost"]["values"]["ratios"]) != 2:
        fail("cupti cost: not 2 ratios")
    if steps["p2p 2rank"]["values"]["wrong"] != 0:
        fail("p2p 2rank: wrong bytes")
    expect(steps, "SKIP", ["gpu tests", "check bf16 P=4", "gemm", "unit bench", "p2p 1rank",
                           "peer", "torch peer", "nccl pipe", "sanitizer"])
    not_selected(steps)
    print("gpu-check on the emulator: passed")


def cpu(tmp, build):
    steps = run_check(tmp, build, PPB_GPU_CHECK_BACKEND="cpu")
    expect(steps, "PASS", ["gpu tests", "sweep P=2", "sweep P=4", "memory", "dp"])
    # Every gpu-labelled test of the build ran (they skip without a GPU).
    listed = subprocess.run(["ctest", "--test-dir", str(build), "--show-only=json-v1", "-L", "gpu"],
                            capture_output=True, text=True, check=True)
    want = sorted(t["name"] for t in json.loads(listed.stdout)["tests"])
    ran = json.loads((tmp / "work" / "gpu-tests.json").read_text())["tests"]
    if sorted(t["name"] for t in ran) != want or any(t["status"] == "failed" for t in ran):
        fail("gpu tests: ran %s, the build has %s" % ([(t["name"], t["status"]) for t in ran], want))
    # Each sweep: 2 schedules x 3 partitions, every one checked.
    for p in (2, 4):
        checked_runs(steps["sweep P=%d" % p], 6)
        if len(list((tmp / "work" / ("sweep-P%d" % p)).glob("*.json"))) < 6:
            fail("sweep P=%d wrote fewer than 6 result files" % p)
    if steps["memory"]["values"]["combinations"] != 12:
        fail("memory: not the 12 combinations")
    checked_runs(steps["dp"], 2)
    expect(steps, "SKIP", ["check bf16 P=4", "bubble P=2", "bubble P=4", "gemm", "unit bench",
                           "cupti cost", "p2p 1rank", "p2p 2rank", "peer", "torch peer",
                           "nccl pipe", "sanitizer"])
    not_selected(steps)
    # What a GPU machine's call brings back: OUT's three files.
    files = sorted(f.name for f in (tmp / "out").iterdir())
    if files != ["gpu-check-work.tar.gz", "gpu-check.json", "gpu-check.txt"]:
        fail("OUT holds %s" % files)
    with tarfile.open(tmp / "out" / "gpu-check-work.tar.gz") as t:
        names = set(t.getnames())
    for f in ("logs/sweep-P2.txt", "gpu-tests.json", "archive-left-out.txt"):
        if f not in names:
            fail("the archive lacks %s" % f)
    if not any(n.startswith("sweep-P2/") and n.endswith(".json") for n in names):
        fail("the archive lacks sweep-P2's results")
    if [n for n in names if ".trace" in n]:
        fail("the archive holds traces: %s" % [n for n in names if ".trace" in n][:3])
    print("gpu-check rehearsal: passed")


def main():
    build = Path(sys.argv[1]).resolve()
    mode = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        {"cpu": cpu, "emulated": emulated}[mode](Path(tmp), build)


if __name__ == "__main__":
    main()
