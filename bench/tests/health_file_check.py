#!/usr/bin/env python3
"""health_file_check.py FILE GPUS REPEATS: a `pipebench health` file holds
schema pipebench.health/1, GPUS GPUs each with every figure (two GEMMs,
three copies, a peer copy to every other GPU) of REPEATS samples > 0, the
environment naming the GPUs, and, without NVML, no gpu_state but the note
saying why."""
import json
import sys


def main():
    path, gpus, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    problems = []
    if doc.get("schema") != "pipebench.health/1":
        problems.append(f"schema {doc.get('schema')!r}")
    if len(doc["gpus"]) != gpus:
        problems.append(f"{len(doc['gpus'])} GPUs, want {gpus}")
    if len(doc["environment"]["gpus"]) != gpus:
        problems.append(f"environment.gpus {doc['environment']['gpus']}")
    for g in doc["gpus"]:
        want = {"gemm_bf16_tflops", "gemm_fp32_tflops", "copy_d2d_gbps", "copy_h2d_gbps",
                "copy_d2h_gbps"}
        want |= {f"peer_gbps_to_gpu{o['device']}" for o in doc["gpus"] if o is not g}
        if set(g["figures"]) != want:
            problems.append(f"GPU {g['device']}: figures {sorted(g['figures'])}, want {sorted(want)}")
        for name, samples in g["figures"].items():
            if len(samples) != repeats or not all(x > 0 for x in samples):
                problems.append(f"GPU {g['device']} {name}: samples {samples}")
        if "gpu_state" in g and not doc["gpu_state_note"] == "":
            problems.append(f"GPU {g['device']}: gpu_state beside the note")
    if not any("gpu_state" in g for g in doc["gpus"]) and \
            not doc["gpu_state_note"].startswith("gpu state: NVML not found"):
        problems.append(f"no gpu_state and note {doc['gpu_state_note']!r}")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: {gpus} GPUs, {repeats} samples of every figure")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
