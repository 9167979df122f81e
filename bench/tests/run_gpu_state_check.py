#!/usr/bin/env python3
"""run_gpu_state_check.py DIR GPUS: every result in DIR of a cuda run under
the tests' stand-in NVML (fake_nvml.cpp) holds metrics.gpu_state with one
entry per GPU the ranks used, each named "<host>: <GPU name> (<bus>)" with
the stand-in's readings for that GPU, sampled several times, and names
NVML's driver version in environment.driver."""
import glob
import json
import os
import sys

# What the stand-in NVML answers for the CUDA emulator's GPU at each bus id.
FAKE_SM_CLOCK = {"0000:01:00.0": 1980, "0000:02:00.0": 1410}


def problems_of(path, gpus):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    out = []
    if doc["environment"].get("driver") != "999.12.34":
        out.append(f"environment.driver {doc['environment'].get('driver')!r}, want NVML's 999.12.34")
    states = doc["metrics"].get("gpu_state") or []
    buses = sorted(s["gpu"].rsplit("(", 1)[-1].rstrip(")") for s in states)
    if buses != sorted(FAKE_SM_CLOCK)[:gpus]:
        out.append(f"gpu_state of buses {buses}, want {sorted(FAKE_SM_CLOCK)[:gpus]}")
    for s in states:
        bus = s["gpu"].rsplit("(", 1)[-1].rstrip(")")
        if not s["gpu"].startswith(doc["environment"]["hosts"][0] + ": "):
            out.append(f"{s['gpu']!r} does not start with its host")
        want = {"sm_clock_mhz_min": FAKE_SM_CLOCK.get(bus), "memory_clock_mhz_median": 3201,
                "power_limit_watts": 700, "temperature_c_max": 42, "throttle_reasons": [],
                "ecc_uncorrected": 0}
        for key, value in want.items():
            if s.get(key) != value:
                out.append(f"{bus}: {key} {s.get(key)!r}, want {value!r}")
        if abs(s["power_watts_mean"] - 512.345) > 1e-9 or s["samples"] < 2:
            out.append(f"{bus}: power {s['power_watts_mean']} W over {s['samples']} samples")
    return out


def main():
    folder, gpus = sys.argv[1], int(sys.argv[2])
    files = [f for f in glob.glob(os.path.join(folder, "*.json")) if not f.endswith(".trace.json")]
    problems = [] if files else [f"no results in {folder}"]
    for f in files:
        problems += [f"{os.path.basename(f)}: {p}" for p in problems_of(f, gpus)]
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: {len(files)} result(s), {gpus} GPU(s) each with NVML's state")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
