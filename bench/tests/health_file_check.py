#!/usr/bin/env python3
"""health_file_check.py FILE GPUS REPEATS [--nvml REASON,...]: a `pipebench
health` file holds schema pipebench.health/1, GPUS GPUs each with every
figure (two GEMMs, three copies, a peer copy to every other GPU) of REPEATS
samples > 0, the environment naming the GPUs, and, without NVML, no
gpu_state but the note saying why. With --nvml (the tests' stand-in NVML,
fake_nvml.cpp): every GPU's gpu_state as that library reads it, with these
throttle reasons, and no note."""
import json
import sys

# What the stand-in NVML answers for the CUDA emulator's GPU 0 and 1.
FAKE_SM_CLOCK = {0: 1980, 1: 1410}


def nvml_problems(doc, reasons):
    problems = []
    if doc["gpu_state_note"] != "":
        problems.append(f"gpu_state_note {doc['gpu_state_note']!r} with NVML there")
    for g in doc["gpus"]:
        st = g.get("gpu_state")
        if st is None:
            problems.append(f"GPU {g['device']}: no gpu_state")
            continue
        want = {"gpu": f"{g['name']} ({g['bus']})",
                "sm_clock_mhz_min": FAKE_SM_CLOCK[g["device"]],
                "sm_clock_mhz_median": FAKE_SM_CLOCK[g["device"]],
                "memory_clock_mhz_median": 3201, "power_limit_watts": 700, "temperature_c_max": 42,
                "throttle_reasons": reasons, "ecc_uncorrected": 0}
        for key, value in want.items():
            if st.get(key) != value:
                problems.append(f"GPU {g['device']}: gpu_state.{key} {st.get(key)!r}, want {value!r}")
        # A mean of equal readings, summed in floating point.
        if abs(st["power_watts_mean"] - 512.345) > 1e-9:
            problems.append(f"GPU {g['device']}: power_watts_mean {st['power_watts_mean']}")
        # Each reading counts 3 more corrected errors: 3 per reading after the first.
        if st["samples"] < 2 or st["ecc_corrected"] != 3 * (st["samples"] - 1):
            problems.append(f"GPU {g['device']}: {st['ecc_corrected']} corrected ECC errors over "
                            f"{st['samples']} samples")
    return problems


def main():
    path, gpus, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    nvml = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[4] == "--nvml" else None
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
    if nvml is not None:
        problems += nvml_problems(doc, nvml)
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: {gpus} GPUs, {repeats} samples of every figure")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
