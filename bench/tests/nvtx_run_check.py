#!/usr/bin/env python3
"""Checks the NVTX ranges a real `pipebench run --profile nvtx` emitted, as
recorded by the injection library (one file per rank): domain and categories,
one range per action named "F s<r> mb<k>" with the micro-batch as payload,
"step <k>" ranges inside one "measure" range around the timed steps, and a
matched start/end range for every message sent and received.

usage: nvtx_run_check.py RECORD_DIR STAGES MICROBATCHES WARMUP ITERS
"""
import glob
import re
import sys

record_dir, P, M, warmup, iters = sys.argv[1], *map(int, sys.argv[2:])
files = sorted(glob.glob(f"{record_dir}/nvtx.*"))
if len(files) != P:
    sys.exit(f"want {P} record files (one per rank), got {len(files)}: {files}")

seen_stages = set()
for path in files:
    lines = open(path).read().splitlines()
    thread = [l for l in lines if l.startswith("thread ")]
    m = re.search(r"rank (\d+) executor", " ".join(thread))
    if not m:
        sys.exit(f"{path}: no named executor thread")
    s = int(m.group(1))
    seen_stages.add(s)
    if "domain pipebench" not in lines:
        sys.exit(f"{path}: no pipebench domain")
    for cat in ("1 forward", "2 backward", "4 send", "5 recv", "6 optimizer", "8 step"):
        if f"category pipebench {cat}" not in lines:
            sys.exit(f"{path}: category '{cat}' not named")
    stack, open_ranges = [], {}
    counts = {"F": 0, "B": 0, "step": 0, "steps_in_measure": 0, "send": 0, "recv": 0, "opt": 0}
    for l in lines:
        if l.startswith("push pipebench "):
            _, _, cat, payload, name = l.split(" ", 4)
            a = re.fullmatch(r"([FB]) s(\d+) mb(\d+)", name)
            if a:
                if int(a.group(2)) != s:
                    sys.exit(f"{path}: rank {s} emitted '{name}'")
                if int(payload) != int(a.group(3)):
                    sys.exit(f"{path}: '{name}' has payload {payload}")
                if cat != {"F": "1", "B": "2"}[a.group(1)]:
                    sys.exit(f"{path}: '{name}' in category {cat}")
                if not any(x.startswith("step ") for x in stack):
                    sys.exit(f"{path}: '{name}' outside a step range")
                counts[a.group(1)] += 1
            elif name.startswith("step "):
                counts["step"] += 1
                if "measure" in stack:
                    counts["steps_in_measure"] += 1
            elif name.startswith("optimizer s"):
                counts["opt"] += 1
            stack.append(name)
        elif l.startswith("pop pipebench"):
            if not stack:
                sys.exit(f"{path}: pop without push")
            stack.pop()
        elif l.startswith("start "):
            _, rid, _, cat, payload, name = l.split(" ", 5)
            msg = re.fullmatch(r"(send|recv) (act|grad) s(\d+)->s(\d+) mb(\d+)", name)
            if not msg:
                sys.exit(f"{path}: unexpected start range '{name}'")
            frm, to = int(msg.group(3)), int(msg.group(4))
            if s not in (frm, to) or abs(frm - to) != 1:
                sys.exit(f"{path}: rank {s} emitted '{name}'")
            counts[msg.group(1)] += 1
            open_ranges[rid] = name
        elif l.startswith("end "):
            rid = l.split(" ")[1]
            if rid not in open_ranges:
                sys.exit(f"{path}: end of unknown range {rid}")
            del open_ranges[rid]
    steps = warmup + iters
    if stack:
        sys.exit(f"{path}: ranges left open: {stack}")
    if open_ranges:
        sys.exit(f"{path}: message ranges never ended: {list(open_ranges.values())[:3]}")
    if counts["F"] != M * steps or counts["B"] != M * steps:
        sys.exit(f"{path}: want {M * steps} F and B ranges, got {counts['F']} F, {counts['B']} B")
    if counts["step"] != steps or counts["steps_in_measure"] != iters:
        sys.exit(f"{path}: {counts['step']} step ranges ({counts['steps_in_measure']} inside measure), "
                 f"want {steps} ({iters})")
    # Every stage but the last sends M activations per step and receives M
    # gradients; every stage but the first the reverse.
    want_msgs = M * steps * ((s < P - 1) + (s > 0))
    if counts["send"] != want_msgs or counts["recv"] != want_msgs:
        sys.exit(f"{path}: {counts['send']} sends / {counts['recv']} receives, want {want_msgs} each")
    if counts["opt"] != steps:
        sys.exit(f"{path}: {counts['opt']} optimizer ranges, want {steps}")
    print(f"rank {s}: {counts}")
if seen_stages != set(range(P)):
    sys.exit(f"stages seen: {sorted(seen_stages)}")
print("ok")
