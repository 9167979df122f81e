#!/usr/bin/env python3
"""The memory model against what runs tracked: `pipebench plan --validate`
on a sweep's result folder predicts each combination's worst-stage peak
(parameters, gradients, activations, workspace and the buffer pool a run is
expected to hold) and the mean absolute error must stay within MAX_MEAN and
every combination's within MAX_ONE (a run may hold a communication buffer
more or less than expected: that is the only slack). Samples/s are printed,
not judged: they depend on how busy the machine was.

usage: plan_validate_memory.py PIPEBENCH MAX_MEAN MAX_ONE DIR...
(ci/gpu-check's memory step imports judge() for the same rule.)
"""
import json
import subprocess
import sys


def judge(doc, max_mean, max_one):
    """The rule over `plan --validate --format json`'s document. Returns
    (lines, failures): a line per combination and the summary line last
    ("12 combinations: mean absolute memory error 0.44% ..."), and a line per
    broken limit (empty when the model holds). Requires at least one
    combination in doc["combinations"]."""
    rows = doc["combinations"]
    lines, failures = [], []
    def pct(x, fmt):  # samples/s is null where the planner refused it
        return "n/a" if x is None else format(100 * x, fmt) + "%"
    for r in rows:
        e = r["error"]["peak_memory_bytes"]
        if e is None:  # no peak measured: nothing to judge
            lines.append(f"{r['source']}: memory n/a (no peak measured)")
            continue
        lines.append(f"{r['source']}: memory {100 * e:+.2f}% (predicted"
                     f" {r['predicted']['peak_memory_bytes']}, measured"
                     f" {r['measured']['peak_memory_bytes']}), samples/s"
                     f" {pct(r['error']['samples_per_second'], '+.1f')}")
        if abs(e) > max_one:
            failures.append(f"{r['source']}: memory error {100 * e:+.2f}% beyond {100 * max_one:.1f}%")
    mean = doc["mean_abs_error"]["peak_memory_bytes"]
    if mean is None:
        return lines, ["no combination measured a peak"]
    lines.append(f"{len(rows)} combinations: mean absolute memory error {100 * mean:.2f}%"
                 f" (samples/s {pct(doc['mean_abs_error']['samples_per_second'], '.1f')})")
    if mean > max_mean:
        failures.append(f"mean memory error {100 * mean:.2f}% beyond {100 * max_mean:.1f}%")
    return lines, failures


def main(argv):
    pb, max_mean, max_one = argv[1], float(argv[2]), float(argv[3])
    out = subprocess.run([pb, "plan", "--validate", *argv[4:], "--format", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"plan --validate exit {out.returncode}: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    if not doc["combinations"]:
        sys.exit(f"no combination predicted; skipped: {doc['skipped']}")
    lines, failures = judge(doc, max_mean, max_one)
    print("\n".join(lines))
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(sys.argv)
