#!/usr/bin/env python3
"""The GPU check: one program for a GPU machine, under 8 minutes, no network.

ci/gpu-check runs this file. It uses the bundle ci/gpu-bundle made
(gpu-bundle/pipebench-gpu.tar.xz: binaries built for sm_80/sm_90, Open MPI,
libraries, the build's gpu-labelled tests as a list), or the build tree
PPB_GPU_CHECK_BUILD names; a bundle that does not unpack or start is the
check's end (FAIL bundle), and it builds here only when
PPB_GPU_CHECK_BUILD_HERE=1 asks (docs/gpu.md).

The steps are the table STEPS below, correctness before speed: each names
its commands (with a time limit each, never past the budget), the result
files it reads, its pass rule (a judge in JUDGES reading those files, JSON
wherever pipebench writes them) and when it skips, saying why. One runner
runs them in order, printing ">> start <step> (limit N s, budget left M s)"
before each and its line after. Every step ends PASS, FAIL, SKIP (with the
reason) or CUT (the time budget, its own time in all or a signal stopped it
or left no time to start it: never a pass); an exception of its commands'
runner or its judge is its FAIL, and the next step runs.

OUT receives three files, rewritten when a step starts and after it ends
(result "running" until the check ends): gpu-check.txt (for people),
gpu-check.json (schema pipebench.gpu-check/1, for machines) and
gpu-check-work.tar.gz, the work folder packed without traces (--trace's
files, Nsight's reports), files over 8 MiB and, while it is over 15 MiB,
the largest files left; its archive-left-out.txt says what it left out.
Everything else (each command's log in logs/, the result folders) goes to
the work folder. A SIGTERM or SIGINT stops the running commands (each runs
in a process group of its own), marks the running step and the rest CUT
and writes the summary and the archive before the check exits. Exit 0 when
nothing failed or was cut (skips are not failures), 1 otherwise, 2 on bad
settings.

Settings (environment): OUT (default out/gpu-check); PPB_GPU_CHECK_WORK
the work folder (default out/gpu-check-work; apart from OUT, neither in
the other; emptied at the start when an earlier check made it, refused
when it holds other files); PPB_GPU_CHECK_SECONDS caps the whole run (450;
on a machine reached through a call with a time limit, at most that limit
less 60 s: docs/gpu.md); PPB_GPU_CHECK_STEPS=name,name,... runs only those
steps (the names of STEPS in any case, a space, dash or underscore alike:
"gpu-tests,sweep-p=2"; an unknown one is exit 2 naming it; the others are
SKIP "not selected (PPB_GPU_CHECK_STEPS)", and a step whose inputs another
step makes skips saying so when that one is not selected); without it
every step but `nights` runs. `nights` (two GPU nights of ci/suite, night
2 gated against night 1, a planted night gated against both, plan
--validate on them, the health probe beside ppb_gemm_bench: several
minutes) runs only when named: PPB_GPU_CHECK_STEPS=nights
PPB_GPU_CHECK_SECONDS=540 on a call of its own, or with gemm for the
probe's comparison; PPB_GPU_CHECK_BUILD=DIR uses that build tree;
PPB_GPU_CHECK_BUILD_HERE=1 builds here (build/gpu-local, up to 300 s)
when there is no bundle or it fails; PPB_GPU_CHECK_BACKEND=cpu rehearses
the sweeps, memory and dp steps on the cpu backend (the test
gpu_check_rehearsal); PPB_GPU_CHECK_EMULATED=DIR runs the cuda steps on
pipebench's CUDA emulator in DIR (a build's cudaemu/; the test
gpu_check_emulated); PPB_GPU_CHECK_SCHEDULES=1f1b,zb-v sweeps those
schedules instead of all; PPB_GPU_CHECK_MODEL (gpt-tiny) and
PPB_GPU_CHECK_BUBBLE_MODEL (gpt-small) the models; PPB_GPU_BUNDLE_DIR where
the bundle unpacks (/tmp/pipebench-gpu). Relative paths are relative to the
repository root. Each probe of the machine (nvidia-smi, pip, ldd, --version,
pipebench list) has PROBE_SECONDS; one that does not answer is a FAIL
saying so.

`gpu_check.py --list` prints the steps as PPB_GPU_CHECK_STEPS names them,
whether each runs by default and with PPB_GPU_CHECK_STEPS as set, its time
limit, the running total of the selected steps' limits and where it passes
PPB_GPU_CHECK_SECONDS (no GPU, no build needed). `gpu_check.py --dry-run`
prints each selected step's commands as they would run, running nothing.

`gpu_check.py --capture-tests BUILD_DIR FILE` writes BUILD_DIR's gpu-labelled
tests (from `ctest --show-only=json-v1`) as a relocatable list (schema
pipebench.gpu-tests/1): ci/gpu-bundle ships it, and this program runs it.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import glob
import importlib.util
import io
import json
import math
import os
import re
import shlex
import shutil
import signal
import site
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Callable

import torch_peer

ROOT = Path(__file__).resolve().parent.parent
SUMMARY_SCHEMA = "pipebench.gpu-check/1"
TESTS_SCHEMA = "pipebench.gpu-tests/1"
LIST_SCHEMA = "pipebench.list/1"
MIN_START_SECONDS = 10  # a command is not started with less of the budget left
KILL_AFTER_SECONDS = 10  # SIGKILL this long after SIGTERM at a time limit
STATUSES = ("PASS", "FAIL", "SKIP", "CUT", "INFO")


class UsageError(Exception):
    """A setting or input file that is wrong: one line, exit 2."""


# --- the table ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    """One command of a step. Strings are templates over the context's and
    the step's variables ("{pb}", "{P}"); an argument that is exactly
    "{name}" of a list variable becomes its items. Its output goes to
    logs/<tag>.txt in the work folder (stdout to `stdout` there when given);
    `fresh` names a folder of the work folder removed before it runs. `outside` runs it in the
    environment the check started with, not the one set up for pipebench:
    for programs that load their own CUDA libraries (PyTorch from its
    wheels), which the toolkit's and the bundle's on LD_LIBRARY_PATH could
    shadow."""
    tag: str
    argv: tuple
    limit: int
    vars: dict = dataclasses.field(default_factory=dict)
    fresh: str = ""
    stdout: str = ""
    outside: bool = False


@dataclasses.dataclass(frozen=True)
class Step:
    """One line of the summary. `skip`: (condition, reason) pairs, the first
    whose condition (CONDITIONS) holds skips the step with that reason;
    `only`: a condition that must hold for the step to exist at all; `runs`:
    the commands (or `execute="tests"`: the gpu-labelled tests); `reads`: the
    result files (in the work folder) the judge reads; `judge`: the pass rule
    (JUDGES), given `args`; `what`: the figures' prefix. Without
    `judge_failures` a command that exits non-zero fails the step before
    the judge is asked."""
    name: str
    judge: str
    runs: tuple = ()
    reads: tuple = ()
    skip: tuple = ()
    only: str = ""
    vars: dict = dataclasses.field(default_factory=dict)
    args: dict = dataclasses.field(default_factory=dict)
    what: str = ""
    execute: str = "commands"
    judge_failures: bool = False
    default: bool = True  # run unless PPB_GPU_CHECK_STEPS names others


NOT_SELECTED = "not selected (PPB_GPU_CHECK_STEPS)"


def step_key(name):
    """How a step is named in PPB_GPU_CHECK_STEPS: any case, a run of
    spaces, dashes or underscores alike ("sweep P=2" = "sweep-p=2")."""
    return re.sub(r"[\s_-]+", "-", name.strip().lower())


def parse_selection(text, steps):
    """The names of the steps PPB_GPU_CHECK_STEPS selects ("gpu-tests,
    sweep-p=2"), or None when it is empty (the default steps run). Raises
    UsageError naming an unknown step and listing the known ones."""
    if not text or not text.strip():
        return None
    names = {step_key(s.name): s.name for s in steps}
    chosen = set()
    for item in text.split(","):
        if not item.strip():
            continue
        key = step_key(item)
        if key not in names:
            raise UsageError("PPB_GPU_CHECK_STEPS: no step '%s' (the steps: %s)" % (
                item.strip(), ", ".join(dict.fromkeys(names))))
        chosen.add(names[key])
    return chosen or None


def mpirun(ranks):
    return ("mpirun", "-np", ranks, "--oversubscribe")


NO_DEVICE = "rehearsal"  # the condition: the cpu backend stands in for the GPU


def sweep_step(p):
    return Step(
        f"sweep P={p}", "results", vars={"P": p, "M": 2 * p},
        runs=(Run("sweep-P{P}", mpirun("{P}") + (
            "{pb}", "run", "--backend", "{be}", "--schedule", "{schedules}",
            "--microbatches", "{M}", "--model", "{model}", "--iters", "3", "--warmup", "1",
            "--check", "--profile", "{profile}", "--trace", "--timeout", "60",
            "--out", "{work}/sweep-P{P}"), limit=90, fresh="sweep-P{P}"),),
        reads=("sweep-P{P}",), what="{P} ranks, --profile {profile}: ",
        skip=(("no_backend", "no usable {be} backend in this build: {why_backend}"),))


# The schedules the bubble steps compare, and the nights sweep unless
# PPB_GPU_CHECK_SCHEDULES names others.
BUBBLE_SCHEDULES = "1f1b,gpipe,zb-h1,interleaved-1f1b,zb-v"


def bubble_step(p):
    return Step(
        f"bubble P={p}", "results", vars={"P": p, "M": 2 * p}, args={"bubble_within": 0.02},
        runs=(Run("bubble-P{P}", mpirun("{P}") + (
            "{pb}", "run", "--backend", "cuda", "--model", "{bubble_model}",
            "--schedule", BUBBLE_SCHEDULES, "--partition", "layer",
            "--microbatches", "{M}", "--iters", "4", "--warmup", "2", "--profile", "cupti",
            "--trace", "--timeout", "60", "--out", "{work}/bubble-P{P}"), limit=90,
            fresh="bubble-P{P}"),),
        reads=("bubble-P{P}",), what="{bubble_model}, {P} ranks: ",
        skip=((NO_DEVICE, "the rehearsal has no device to compare"),
              ("emulated", "on the emulator the sweeps compare them"
                           " ({bubble_model} would take hours there)"),
              ("no_cuda_or_cupti", "needs the cuda backend and the cupti collector")))


def cupti_cost_step(model_var, only=""):
    runs = tuple(
        Run("cupti-cost-{cm}-%d-%s" % (r, prof.replace(",", "-")), mpirun("2") + (
            "{pb}", "run", "--backend", "cuda", "--schedule", "1f1b", "--partition", "layer",
            "--microbatches", "{cost_m}", "--model", "{cm}", "--iters", "{cost_iters}",
            "--warmup", "{cost_warmup}", "--profile", prof,
            "--out", "{work}/cupti-cost/{cm}-%d-%s" % (r, prof.replace(",", "-"))),
            limit=60, fresh="cupti-cost/{cm}-%d-%s" % (r, prof.replace(",", "-")))
        for r in (1, 2) for prof in ("nvtx", "nvtx,cupti"))
    return Step(
        "cupti cost", "cupti_cost", runs=runs, only=only, vars={"cm": model_var},
        reads=tuple("cupti-cost/{cm}-%d-%s" % (r, p) for r in (1, 2) for p in ("nvtx", "nvtx-cupti")),
        what="1f1b x layer, P=2, M={cost_m}, {cm}: ",
        skip=((NO_DEVICE, "the rehearsal has no GPU for CUPTI to record"),
              ("cupti_not_built", "the cupti collector is not in this build")))


def p2p_step(n):
    return Step(
        f"p2p {n}rank", "p2p", vars={"N": n},
        runs=(Run("p2p-{N}", mpirun("{N}") + (
            "{pb}", "p2p", "--memory", "device", "--min", "1KiB", "--max", "{p2p_max}", "-n", "20",
            "--json", "{work}/p2p-{N}.json"), limit=45),),
        reads=("p2p-{N}.json",),
        skip=((NO_DEVICE, "the rehearsal has no GPU for the device ring"),)
        + ((("emulated", "one rank sends to itself through NCCL, which is not emulated"),)
           if n == 1 else ())
        + (("no_cuda", "no usable GPU: {why_cuda}"),))


def torch_peer_step():
    """pipebench on one rank against PyTorch eager on the same shapes and step
    (ci/torch_peer.py, the Python running this check): the bubble model in
    bf16 and fp32 (samples/s and peaks), the sweep model in bf16 also
    against PyTorch's step replayed from a CUDA graph (per micro-batch)."""
    runs = [Run("torch-peer-list", ("{pb}", "list", "--json"), limit=20, fresh="torch-peer",
                stdout="torch-peer/list.json")]
    for case, model, dtype, iters, warmup, graph in PEER_CASES:
        runs.append(Run("torch-peer-pipebench-" + case, mpirun("1") + (
            "{pb}", "run", "--backend", "cuda", "--model", model, "--dtype", dtype,
            "--schedule", "1f1b", "--partition", "layer", "--microbatches", "{peer_m}",
            "-n", str(iters), "-w", str(warmup), "--timeout", "60",
            "--out", "{work}/torch-peer/pipebench-" + case), limit=90))
        runs.append(Run("torch-peer-" + case, (
            "{python}", "{torch_peer}",
            "{work}/torch-peer/pipebench-%s/1f1b__layer__P1_M{peer_m}.json" % case,
            "--models", "{work}/torch-peer/list.json", "--json",
            "{work}/torch-peer/%s.json" % case) + (("--graph",) if graph else ()), limit=120,
            outside=True))
    return Step(
        "torch peer", "torch_peer", runs=tuple(runs), judge_failures=True,
        args={"min_ratio": 1.0, "max_over_graph": 1.3},
        reads=tuple("torch-peer/%s.json" % c[0] for c in PEER_CASES),
        what="1 rank, 1f1b, M={peer_m}, pipebench / PyTorch eager (sdpa): ",
        skip=((NO_DEVICE, "the rehearsal has no GPU for PyTorch"),
              ("emulated", "the emulator's figures are not a GPU's"),
              ("no_cuda", "no usable GPU: {why_cuda}"),
              ("no_torch", "no torch in {python}: PyTorch is the peer")))


def nights_step():
    """Two GPU nights of ci/suite and a planted one, as a user runs them on
    a bare GPU machine (README, "GPU nights"): night 1, night 2 gated
    against it, a night with stage 1 planted slower (outside nights/, as
    the README keeps it) gated against both, and `plan --validate` over
    the two nights' cuda results (run before the planted night). Not a default step: the nights take a lease
    of their own (PPB_GPU_CHECK_STEPS=nights)."""
    suite = ("env", "-u", "PPB_BASELINE", "-u", "PPB_PLANT_CUDA", "{nights_env}")
    return Step(
        "nights", "nights", default=False, judge_failures=True,
        runs=(Run("nights-1", suite + ("PPB_RESULTS={work}/nights/1", "bash", "{suite}"),
                  limit=150, fresh="nights"),
              Run("nights-2", suite + ("PPB_RESULTS={work}/nights/2", "bash", "{suite}",
                                       "--baseline", "{work}/nights/1"), limit=150),
              # Before the planted night: it reads nights 1 and 2 only, and a
              # planted night cut by the budget still leaves its figure.
              Run("nights-validate", ("{pb}", "plan", "--validate", "{work}/nights/1/cuda",
                                      "{work}/nights/2/cuda", "--format", "json"),
                  limit=30, stdout="nights-validate.json"),
              Run("nights-planted", suite + (
                  "PPB_RESULTS={work}/nights-planted", "PPB_PLANT_CUDA={plant}", "bash", "{suite}",
                  "--baseline", "{work}/nights/1", "--baseline", "{work}/nights/2"),
                  limit=210, fresh="nights-planted")),
        reads=("nights/1", "nights/2", "nights-planted", "nights-validate.json",
               "gemm-bf16.json", "gemm-fp32.json"),
        args={"max_samples_error": 0.05, "max_memory_error": 0.02, "gemm_within": 0.05},
        what="ci/suite's cuda sweep ({nights_schedules}), planted {plant}: ",
        skip=((NO_DEVICE, "the rehearsal's cpu backend is no GPU night"
                          " (ci/test's suite_e2e gates cpu nights)"),
              ("no_cuda", "no usable GPU: {why_cuda}")))


# The torch peer step's runs: (name, model, dtype, timed steps, warm-up
# steps, whether PyTorch's step is also replayed from a CUDA graph).
PEER_CASES = (("bf16", "{bubble_model}", "bf16", 6, 2, False),
              ("fp32", "{bubble_model}", "fp32", 6, 2, False),
              ("tiny", "{model}", "bf16", 20, 3, True))


STEPS = (
    # In order of what a short lease must not lose, correctness before
    # speed: the unit tests, every schedule x partition under --check on 2
    # ranks, in bf16 on 4, the sanitizer, then the sweep on 4 ranks and the
    # memory model (which reads both sweeps); then the speed criteria
    # (PyTorch on the same model, each unit kind's time beside it, the
    # staged wait); then the figures for reading (bubbles, dp, GEMMs,
    # CUPTI's cost, p2p), which a budget that binds cuts first. A step that
    # reads another's files comes after it (memory after both sweeps, nights
    # after gemm).
    # 180 s: run_cuda_check_{fp32,bf16} take a warm-up step per combination
    # (--check compares the step that runs the CUDA graphs first); the tests
    # start longest TIMEOUT first (run_tests).
    Step("gpu tests", "tests", execute="tests", args={"limit": 180, "jobs": 4},
         reads=("gpu-tests.json",),
         skip=(("emulated", "on the emulator the label emulated runs them (ctest -L emulated)"),)),
    sweep_step(2),
    # The sweeps run fp32 (the flash kernels); bf16 (cuDNN's attention) passes --check
    # on every schedule x partition too (2 ranks: the gpu test run_cuda_check_bf16).
    Step("check bf16 P=4", "results",
         runs=(Run("check-bf16-P4", mpirun("4") + (
             "{pb}", "run", "--backend", "cuda", "--dtype", "bf16", "--schedule", "{schedules}",
             "--partition", "all", "--microbatches", "8", "--model", "{model}", "--iters", "1",
             "--warmup", "1", "--check", "--timeout", "60", "--out", "{work}/check-bf16-P4"),
             limit=120, fresh="check-bf16-P4"),),
         reads=("check-bf16-P4",), what="4 ranks, bf16, --check: ",
         skip=((NO_DEVICE, "the rehearsal's cpu backend has no bf16"),
               ("emulated", "ctest -L emulated runs bf16 --check (emulated_run_cuda_check_bf16)"),
               ("no_cuda", "no usable GPU: {why_cuda}"))),
    # memcheck on 2 ranks; racecheck (shared-memory hazards) and synccheck
    # (barriers) on one: the emulator runs a block's threads one after
    # another between barriers, so only a GPU shows a missing __syncthreads().
    # One warm-up step after the eager check step: the tools see the actions'
    # CUDA graphs run too, and --check compares that step with the reference.
    Step("sanitizer", "sanitizer", judge_failures=True,
         args={"what": "run --backend cuda 1f1b"},
         runs=tuple(Run("sanitizer-" + tool, mpirun(ranks) + (
             "compute-sanitizer", "--tool", tool, "--error-exitcode", "9",
             "--print-limit", "20", "{pb}", "run", "--backend", "cuda", "--schedule", "1f1b",
             "--microbatches", "2", "--model", "{model}", "--iters", "1", "--warmup", "1",
             "--check", "--out", "{work}/sanitizer-" + tool), limit=90)
             for tool, ranks in (("memcheck", "2"), ("racecheck", "1"), ("synccheck", "1"))),
         skip=((NO_DEVICE, "the rehearsal has no GPU to sanitize"),
               ("emulated", "compute-sanitizer needs a GPU"),
               ("no_sanitizer", "compute-sanitizer not on PATH"),
               ("no_cuda", "no usable GPU: {why_cuda}"))),
    sweep_step(4),
    # The memory model (the cuda kernels' workspace included) against the
    # peaks both sweeps tracked, through plan --validate.
    Step("memory", "memory", args={"max_mean": 0.02, "max_one": 0.04},
         runs=(Run("memory", ("{pb}", "plan", "--validate", "{sweep_dirs}", "--format", "json"),
                   limit=30, stdout="memory.json"),),
         reads=("memory.json",),
         skip=(("no_sweep_selected", "its inputs are the sweeps' results, and"
                                     " PPB_GPU_CHECK_STEPS selected no sweep"),
               ("no_sweep_results", "no sweep wrote result files to compare with"))),
    # PyTorch, as a user would train the same model: the speed and memory
    # pipebench's kernels are measured against.
    torch_peer_step(),
    # Each unit kind's forward, input and weight backward on the device
    # (ppb_cuda_unit_bench, CUDA events): figures for reading, no threshold,
    # right after the peer's ratios because they say where the time went.
    Step("unit bench", "unit_bench", what="gpt-small per unit kind and pass: ",
         runs=tuple(Run("unit-bench-%s" % d, (
             "{unit_bench}", "--model", "gpt-small", "--benchmark_filter=^%s/" % d,
             "--benchmark_min_time=0.05", "--benchmark_out={work}/unit-bench-%s.json" % d,
             "--benchmark_out_format=json"), limit=90) for d in ("bf16", "fp32")),
         reads=("unit-bench-bf16.json", "unit-bench-fp32.json"),
         skip=((NO_DEVICE, "the rehearsal has no GPU for the units"),
               ("emulated", "ctest -L emulated runs it on a small model (emulated_cuda_unit_bench)"),
               ("no_unit_bench", "ppb_cuda_unit_bench is not in this build (built without CUDA)"),
               ("no_cuda", "no usable GPU: {why_cuda}"))),
    # The transports' device-to-device messages at 64 MiB with the
    # executor's default wait strategy and with --wait block.
    Step("peer", "peer", what="2 ranks, 64 MiB, the default wait vs --wait block: ",
         runs=tuple(Run("peer-%s" % w, mpirun("2") + (
             "{pb}", "p2p", "--memory", "device", "--min", "64MiB", "--max", "64MiB", "-n", "20")
             + (("--wait", "block") if w == "block" else ())
             + ("--json", "{work}/peer-%s.json" % w), limit=45) for w in ("default", "block")),
         reads=("peer-default.json", "peer-block.json"),
         skip=((NO_DEVICE, "the rehearsal has no GPU for the device ring"),
               ("emulated", "the emulator's copies are CPU copies: the wait strategies'"
                            " difference is a GPU's"),
               ("no_cuda", "no usable GPU: {why_cuda}"))),
    # On gpt-tiny every kernel is shorter than its launch, so the two bubbles
    # differ by design (the sweeps print how far); on a model whose kernels
    # outlast their launches CUPTI's device bubble must agree with the
    # executor's event bubble.
    bubble_step(2),
    bubble_step(4),
    # MPI_Iallreduce is not CUDA-aware: the executor stages the device
    # gradients through pinned host memory.
    Step("dp", "results", what="2 stages x 2 replicas: ",
         runs=(Run("dp", mpirun("4") + (
             "{pb}", "run", "--backend", "{be}", "--stages", "2", "--schedule", "1f1b,zb-h1",
             "--partition", "layer", "--microbatches", "4", "--model", "{model}", "--iters", "3",
             "--warmup", "1", "--check", "--out", "{work}/dp"), limit=60, fresh="dp"),),
         reads=("dp",),
         skip=(("no_backend", "no usable {be} backend in this build: {why_backend}"),)),
    # Every GEMM of one gpt-small layer and its head, through the backend's
    # call and through cublasLt's fastest proposed algorithm.
    Step("gemm", "gemm", what="gpt-small per micro-batch, backend vs cuBLAS alone (ratio): ",
         runs=tuple(Run("gemm-%s" % d, (
             "{gemm_bench}", "--model", "gpt-small", "--dtype", d, "--iters", "20", "--algos", "8",
             "--json", "{work}/gemm-%s.json" % d), limit=90) for d in ("bf16", "fp32")),
         reads=("gemm-bf16.json", "gemm-fp32.json"),
         skip=((NO_DEVICE, "the rehearsal has no GPU for cuBLAS"),
               ("emulated", "cublasLt is not emulated"),
               ("no_gemm_bench", "ppb_gemm_bench is not in this build (built without CUDA)"))),
    # What CUPTI costs: the same run alternately without and with it, twice;
    # gpt-tiny is launch-bound (CUPTI's cost per kernel shows), the bubble
    # model's kernels outlast their launches. On the emulator the ratio is
    # the emulator's, no GPU's.
    cupti_cost_step("{model}"),
    cupti_cost_step("{bubble_model}", only="real_device"),
    p2p_step(1),
    p2p_step(2),
    Step("nccl pipe", "results", what="{nccl_p} ranks on {nccl_p} GPUs: ",
         runs=(Run("nccl", mpirun("{nccl_p}") + (
             "{pb}", "run", "--backend", "cuda", "--transport", "nccl",
             "--schedule", "1f1b,interleaved-1f1b,zb-h1", "--microbatches", "{nccl_m}",
             "--model", "{model}", "--iters", "3", "--warmup", "1", "--check",
             "--out", "{work}/nccl-P{nccl_p}"), limit=90, fresh="nccl-P{nccl_p}"),),
         reads=("nccl-P{nccl_p}",),
         skip=((NO_DEVICE, "the rehearsal has no GPU for NCCL"),
               ("emulated", "NCCL is not emulated"),
               ("no_nccl", "{why_nccl}"),
               ("one_gpu", "needs 2 GPUs (NCCL cannot put two ranks of a communicator on one"
                           " GPU); the 1-rank self send/receive ran in p2p 1rank"),
               ("no_cuda", "no usable cuda backend in this build"))),
    # Two clean GPU nights gate clean, a planted slowdown is caught, the
    # planner's error on them, the health probe against ppb_gemm_bench.
    nights_step(),
)


# --- the context ------------------------------------------------------------------


@dataclasses.dataclass
class Context:
    """What the steps run with: the paths (OUT for the summary and the
    archive, `work` for everything the steps write), the settings,
    `pipebench list --json` of this build, the machine's GPUs, the
    environment of every command, the budget, and the commands running now
    (so that a signal can stop them)."""
    out: Path
    budget: float
    work: Path | None = None  # None: OUT itself (the unit tests' contexts)
    start: float = dataclasses.field(default_factory=time.monotonic)
    env: dict = dataclasses.field(default_factory=lambda: dict(os.environ))
    start_env: dict = dataclasses.field(default_factory=lambda: dict(os.environ))
    build: Path | None = None
    backend: str = "cuda"
    model: str = "gpt-tiny"
    bubble_model: str = "gpt-small"
    schedules: str = "all"
    emulator: Path | None = None
    gpus: int = 0
    listing: dict = dataclasses.field(default_factory=dict)
    tests: list | None = None  # the gpu-labelled tests, expanded
    tests_missing: str = ""    # why there is no list of them
    selected: set | None = None  # the steps PPB_GPU_CHECK_STEPS names; None: the default ones
    wall_start: float = dataclasses.field(default_factory=time.time)
    build_here: bool = False  # PPB_GPU_CHECK_BUILD_HERE=1: build here when there is no bundle
    dry: bool = False  # --dry-run: the sweeps' folders taken as made
    stopping: str = ""  # the signal's name once one asked the check to stop
    finishing: bool = False  # the final summary is being written: a signal no longer interrupts
    in_step: bool = False  # a step runs: a signal lets it end and be judged (run_steps)
    signalled: set = dataclasses.field(default_factory=set)  # pids the stop found running
    children: dict = dataclasses.field(default_factory=dict)  # pid -> Popen, running now
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)

    def __post_init__(self):
        if self.work is None:
            self.work = self.out

    def left(self):
        return self.budget - (time.monotonic() - self.start)

    def selects(self, step):
        """Whether a step (a Step, or the name of one in STEPS) runs:
        PPB_GPU_CHECK_STEPS names it, or names none and it is a default
        step."""
        steps = [step] if isinstance(step, Step) else [s for s in STEPS if s.name == step]
        if self.selected is not None:
            return any(s.name in self.selected for s in steps)
        return any(s.default for s in steps)

    def entry(self, kind, name):
        return next((e for e in self.listing.get(kind, []) if e["name"] == name), None)

    def listed(self, kind, name):
        return self.entry(kind, name) is not None

    def available(self, kind, name):
        e = self.entry(kind, name)
        return bool(e and e.get("available"))

    def why_not(self, kind, name):
        e = self.entry(kind, name)
        if e is None:
            return f"no {name} in this build"
        return e.get("why_not") or "available"

    @property
    def pb(self):
        return self.build / "bench" / "pipebench"

    def vars(self):
        sweeps = [str(self.work / ("sweep-P%d" % p)) for p in (2, 4)
                  if self.selects("sweep P=%d" % p)
                  and (self.dry or (self.work / ("sweep-P%d" % p)).is_dir())]
        emu = self.emulator is not None
        pb = str(self.pb) if self.build else "pipebench"
        nights_schedules = self.schedules if self.schedules != "all" else BUBBLE_SCHEDULES
        nccl_p = max(2, min(self.gpus, 4))
        return {
            "pb": pb, "work": str(self.work),
            "be": self.backend, "model": self.model, "bubble_model": self.bubble_model,
            "schedules": self.schedules, "profile": self.profile(),
            "gemm_bench": str(self.build / "pipeline" / "exec" / "ppb_gemm_bench")
            if self.build else "ppb_gemm_bench",
            "unit_bench": str(self.build / "bench" / "ppb_cuda_unit_bench")
            if self.build else "ppb_cuda_unit_bench",
            "sweep_dirs": sweeps,
            # The emulator's device copies are CPU copies through staging: up
            # to 4 MiB proves the path, larger ones only the host's load.
            "p2p_max": "4MiB" if emu else "64MiB",
            "cost_iters": 2 if emu else 20, "cost_warmup": 1 if emu else 3, "cost_m": 4 if emu else 8,
            "nccl_p": nccl_p, "nccl_m": 2 * nccl_p, "gpus": self.gpus,
            "why_backend": self.why_not("backends", self.backend),
            "why_cuda": self.why_not("backends", "cuda"),
            "why_nccl": self.why_not("transports", "nccl"),
            "python": sys.executable, "torch_peer": str(ROOT / "ci" / "torch_peer.py"),
            "peer_m": 8,
            # The nights: the suite's cuda sweep alone, with this build's
            # pipebench, the health probe required (not left to whether
            # nvidia-smi is on PATH); on the emulator one small job per
            # night (2 ranks, the layer partition, a probe of small sizes)
            # and a plant of x2, as suite_cuda_e2e plants: 10% is within
            # the noise of CPU-emulated timings on a shared host.
            "suite": str(ROOT / "ci" / "suite"), "nights_schedules": nights_schedules,
            "nights_env": ["PPB_PIPEBENCH=" + pb, "PPB_GPU_SWEEP=on", "PPB_CPU_RUN=0",
                           "PPB_TIMED_RUN=0", "PPB_DP_RUN=0", "PPB_HEALTH=1",
                           "PPB_CUDA_SCHEDULES=" + nights_schedules]
            + (["PPB_CUDA_MODELS=" + self.model, "PPB_CUDA_RANKS=2", "PPB_CUDA_PARTITIONS=layer",
                "PPB_HEALTH_ARGS=--model %s --copy-bytes 1MiB --repeats 3"
                " --iters 2" % self.model] if emu
               else ["PPB_CUDA_MODELS=%s %s" % (self.model, self.bubble_model)]),
            "plant": "1:2" if emu else "1:1.10",
            "validate_model": self.model if emu else self.bubble_model,
        }

    def profile(self):
        return "nvtx,cupti" if self.listed("collectors", "cupti") else "nvtx"


CONDITIONS: dict[str, Callable[[Context], bool]] = {
    NO_DEVICE: lambda c: c.backend != "cuda",
    "emulated": lambda c: c.emulator is not None,
    "real_device": lambda c: c.emulator is None and c.backend == "cuda",
    "no_backend": lambda c: not c.available("backends", c.backend),
    "no_cuda": lambda c: not c.available("backends", "cuda"),
    "no_cuda_or_cupti": lambda c: not (c.available("backends", "cuda")
                                       and c.available("collectors", "cupti")),
    "cupti_not_built": lambda c: not c.listed("collectors", "cupti"),
    "no_nccl": lambda c: not c.available("transports", "nccl"),
    "one_gpu": lambda c: c.gpus < 2,
    "no_sanitizer": lambda c: shutil.which("compute-sanitizer", path=c.env.get("PATH")) is None,
    "no_gemm_bench": lambda c: not (c.build and os.access(
        c.build / "pipeline" / "exec" / "ppb_gemm_bench", os.X_OK)),
    "no_unit_bench": lambda c: not (c.build and os.access(
        c.build / "bench" / "ppb_cuda_unit_bench", os.X_OK)),
    "no_sweep_selected": lambda c: not (c.selects("sweep P=2") or c.selects("sweep P=4")),
    "no_sweep_results": lambda c: not c.vars()["sweep_dirs"],
    "no_torch": lambda c: importlib.util.find_spec("torch") is None,
}


def expand(template, variables):
    """A template with its variables filled in ("{P} ranks" -> "2 ranks")."""
    return str(template).format_map(variables)


def expand_argv(argv, variables):
    """The argument list of a Run: each template filled in; "{name}" of a
    list variable becomes the list's items."""
    out = []
    for a in argv:
        m = re.fullmatch(r"\{(\w+)\}", str(a))
        if m and isinstance(variables.get(m.group(1)), (list, tuple)):
            out += [str(v) for v in variables[m.group(1)]]
        else:
            out.append(expand(a, variables))
    return out


def step_vars(ctx_vars, step, run=None):
    """The context's variables with the step's (and the run's) on top; their
    values may be templates over the context's ("{cm}" = "{model}")."""
    v = dict(ctx_vars)
    for extra in (step.vars, run.vars if run else {}):
        for k, val in extra.items():
            v[k] = expand(val, v) if isinstance(val, str) else val
    return v


# --- running ----------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """How one command ended: exit status (None when not started), whether
    its time ran out, what stopped it or kept it from starting
    (`stopped_by`: "limit", its own; "budget", PPB_GPU_CHECK_SECONDS;
    "window", its step's limit in all (the gpu tests); "signal", a SIGTERM
    or SIGINT to the check), and its log."""
    tag: str
    log: Path
    rc: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    cut: bool = False  # not its own limit stopped it or kept it from starting
    limit: float = 0.0
    stopped_by: str = ""
    signame: str = ""  # the signal that stopped the check, where stopped_by is "signal"


class Stopped(BaseException):
    """A SIGTERM or SIGINT asked the check to stop: raised in the main thread
    once the running commands are stopped (outside a step; inside one,
    once the step is judged: stop_handler), caught by check(), which marks
    the setup phase running and the steps not reached CUT and writes the
    summary. Not an Exception, so that no step's own handler takes it for
    the step's failure."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame


def sessions():
    """{session id: [pids]} of the processes alive (from /proc: a stat's
    sixth field, counted after the command name's closing parenthesis),
    zombies left out; {} without /proc. Open MPI's ranks may sit in
    process groups of their own inside mpirun's session, out of reach of a
    signal to mpirun's group."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for d in names:
        if not d.isdigit():
            continue
        try:
            fields = Path("/proc", d, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 3 and fields[0] != "Z":
            out.setdefault(int(fields[3]), []).append(int(d))
    return out


def signal_session(sid, sig, alive):
    """`sig` to session `sid`'s process group and to each of its processes
    (`alive`: sessions())."""
    for kill, target in [(os.killpg, sid)] + [(os.kill, pid) for pid in alive.get(sid, [])]:
        try:
            kill(target, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_groups(procs, grace):
    """SIGTERM to each command's session (each runs in a session of its
    own: its group and every process in it), SIGKILL to those still there
    `grace` seconds later (not to a command reaped whose session is empty:
    its number may be another's by then)."""
    alive = sessions()
    for p in procs:
        signal_session(p.pid, signal.SIGTERM, alive)
    end = time.monotonic() + grace
    while True:
        alive = sessions()
        left = [p for p in procs if p.poll() is None or p.pid in alive]
        if not left or time.monotonic() >= end:
            break
        time.sleep(0.05)
    for p in left:
        signal_session(p.pid, signal.SIGKILL, alive)


def run_command(ctx, tag, argv, limit, log, stdout=None, cwd=None, env=None,
                deadline=math.inf):
    """Runs argv with the smallest of `limit`, what is left of the budget and
    of `deadline` (time.monotonic()), output to `log` (stdout to `stdout`
    when given); SIGTERM to its process group at the limit, SIGKILL
    KILL_AFTER_SECONDS later. Not started when the budget or the deadline
    leaves less than MIN_START_SECONDS, nor once the check is stopping:
    then rc is None. `cut` says the budget, the deadline or a signal, not
    the command's own limit, stopped it or kept it from starting."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if stdout:
        Path(stdout).parent.mkdir(parents=True, exist_ok=True)
    bounds = {"limit": limit, "budget": ctx.left(), "window": deadline - time.monotonic()}
    why = min(bounds, key=bounds.get)  # on a tie the command's own limit
    eff = bounds[why]
    o = Outcome(tag, log, limit=eff)
    if ctx.stopping or (why != "limit" and eff < MIN_START_SECONDS):
        o.stopped_by = "signal" if ctx.stopping else why
        o.signame = ctx.stopping
        o.cut = True
        log.write_text("not started: %s\n" % {
            "signal": f"the check was stopped ({ctx.stopping})",
            "budget": "the time budget was spent", "window": "its step's time was spent"}[o.stopped_by])
        return o
    t0 = time.monotonic()
    with open(log, "w") as lf:
        lf.write("+ " + " ".join(argv) + "\n")
        lf.flush()
        so = open(stdout, "w") if stdout else lf
        try:
            p = subprocess.Popen(argv, stdout=so, stderr=lf, stdin=subprocess.DEVNULL, cwd=cwd,
                                 env=env or ctx.env, start_new_session=True)
        except OSError as e:
            lf.write(f"cannot start {argv[0]}: {e}\n")
            o.rc = 127
            return o
        finally:
            if stdout:
                so.close()
        with ctx.lock:
            ctx.children[p.pid] = p
        try:
            if ctx.stopping:  # the signal came between the start and the line above
                ctx.signalled.add(p.pid)
                stop_groups([p], 1)
            o.rc = p.wait(timeout=eff)
        except subprocess.TimeoutExpired:
            o.timed_out = True
            o.stopped_by = why
            o.cut = why != "limit"
            stop_groups([p], KILL_AFTER_SECONDS)
            o.rc = p.wait()
            lf.write("\n%s of %.0f s reached: stopped\n" % (
                {"limit": "time limit", "budget": "budget", "window": "the step's time"}[why], eff))
        finally:
            with ctx.lock:
                ctx.children.pop(p.pid, None)
        # Cut where the stop found it running: one that ended before (a
        # failure included) keeps its own verdict.
        if ctx.stopping and not o.timed_out and p.pid in ctx.signalled:
            o.cut, o.stopped_by, o.signame = True, "signal", ctx.stopping
            lf.write(f"\nstopped: the check was stopped ({ctx.stopping})\n")
    o.seconds = time.monotonic() - t0
    return o


def run_commands(ctx, step, variables):
    """A step's commands in order, each after its `fresh` folder is removed;
    a later one runs even when an earlier one failed (the budget still
    applies to each)."""
    outcomes = []
    for r in step.runs:
        v = step_vars(variables, step, r)
        if r.fresh:
            shutil.rmtree(ctx.work / expand(r.fresh, v), ignore_errors=True)
        outcomes.append(run_command(
            ctx, expand(r.tag, v), expand_argv(r.argv, v), r.limit,
            ctx.work / "logs" / (expand(r.tag, v) + ".txt"),
            stdout=ctx.work / expand(r.stdout, v) if r.stdout else None,
            env=ctx.start_env if r.outside else None))
    return outcomes


@dataclasses.dataclass
class Verdict:
    """A step's result: its status, the figures for people and the same
    figures as values for machines."""
    status: str
    figures: str
    values: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class StepResult:
    """A summary line and its record in gpu-check.json: the verdict, how long
    the step took, its logs and the result files it read (in the work
    folder)."""
    name: str
    status: str
    figures: str
    values: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    logs: list = dataclasses.field(default_factory=list)
    reads: list = dataclasses.field(default_factory=list)


def first_error(log, pattern=r"error|abort"):
    """The first line of a log matching pattern (a failure's likely reason)."""
    try:
        for line in Path(log).read_text(errors="replace").splitlines():
            if re.search(pattern, line, re.I) and not line.startswith("+ "):
                return line.strip()[:150]
    except OSError:
        pass
    return ""


def build_error(log):
    """Why a configure and build failed, from its log: CMake's first error
    with its message (on the lines after the heading), else the first
    compiler or linker error, else the log's last line. CMake's own "-- "
    status lines are not reasons: "Looking for sgemm_ - not found" is one
    of FindBLAS's probes."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for i, line in enumerate(lines):
        if line.startswith("CMake Error"):
            rest = next((x.strip() for x in lines[i + 1:] if x.strip()), "")
            return (line.strip().rstrip(":") + ": " + rest)[:200]
    for line in lines:
        if not line.startswith(("-- ", "+ ")) and re.search(
                r"\berror\b|Could NOT find|undefined reference", line, re.I):
            return line.strip()[:200]
    return next((x.strip() for x in reversed(lines) if x.strip()), "")[:200]


def cut_or_failed(outcomes, judge_failures):
    """The verdict the commands force before the judge reads anything: CUT
    when the budget (or a signal) stopped one or kept it from starting,
    FAIL when one timed out or (unless the judge reads failures) exited
    non-zero; None when the judge decides."""
    cut = [o for o in outcomes if o.cut]
    cut_words = ""
    if cut:
        o = cut[0]
        what = o.signame if o.stopped_by == "signal" else "the time budget"
        how = (f"stopped by {what} after {o.seconds:.0f} s" if o.rc is not None
               else f"not started: the check was stopped ({o.signame})" if o.stopped_by == "signal"
               else "not started: the time budget was spent")
        cut_words = f"{o.tag}: {how}"
    # A command that finished and failed fails the step, also when a later
    # one was cut: a cut never hides a failure.
    finished = [o for o in outcomes if not o.cut]
    timed = [o for o in finished if o.timed_out]
    bad = [o for o in finished if o.rc != 0 and not o.timed_out]
    failed = [f"{o.tag}: timed out after {o.limit:.0f} s" for o in timed]
    if not judge_failures or cut:
        failed += [f"{o.tag}: exit {o.rc} ({first_error(o.log)})" for o in bad]
    if failed:
        return Verdict("FAIL", "; ".join(failed) + (f"; then {cut_words}" if cut_words else ""))
    if cut:
        return Verdict("CUT", cut_words)
    return None


def step_limit(step):
    """A step's time limit: its commands' limits together, or the gpu
    tests' limit in all (the budget caps either)."""
    return step.args["limit"] if step.execute == "tests" else sum(r.limit for r in step.runs)


def raised(ctx, step, what, e):
    """A step's FAIL for an exception of its executor or judge: one line
    naming it; the traceback to logs/<step>.raised.txt in the work folder."""
    try:  # the step's variables in the name: two "cupti cost" steps differ by their model
        values = step_vars(ctx.vars(), step)
        extra = [str(values[k]) for k in step.vars]
    except Exception:  # noqa: BLE001 - a name without them then
        extra = []
    log = ctx.work / "logs" / (re.sub(r"[^\w.=-]", "_", "-".join([step_key(step.name)] + extra))
                               + ".raised.txt")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(traceback.format_exc())
    except OSError:
        pass
    text = (str(e).splitlines() or [""])[0][:200]
    return "%s raised %s: %s (logs/%s)" % (what, type(e).__name__, text, log.name)


def run_step(ctx, step, on_start=None):
    """One step, start to verdict: skipped (not selected, or a skip
    condition holds), or its commands run and judged; on_start(limit) is
    called before the commands start. An exception of the executor or the
    judge is the step's FAIL ("judge raised ValueError: ..."), never the
    whole check's end."""
    if not ctx.selects(step):
        return StepResult(step.name, "SKIP", NOT_SELECTED)
    variables = step_vars(ctx.vars(), step)
    reads = [expand(r, variables) for r in step.reads]
    for cond, reason in step.skip:
        if CONDITIONS[cond](ctx):
            return StepResult(step.name, "SKIP", expand(reason, variables))
    if on_start:
        on_start(step_limit(step))
    t0 = time.monotonic()
    try:
        outcomes = EXECUTORS[step.execute](ctx, step, variables)
    except Exception as e:  # noqa: BLE001 - the step's failure, not the check's
        return StepResult(step.name, "FAIL", raised(ctx, step, "run", e),
                          seconds=round(time.monotonic() - t0, 1), reads=reads)
    forced = cut_or_failed(outcomes, step.judge_failures)
    try:
        v = forced or JUDGES[step.judge](ctx, step, [ctx.work / r for r in reads], outcomes)
        prefix = expand(step.what, variables) if forced is None and v.status != "SKIP" else ""
    except Exception as e:  # noqa: BLE001
        v, prefix = Verdict("FAIL", raised(ctx, step, "judge", e)), ""
    return StepResult(step.name, v.status, prefix + v.figures, v.values,
                      round(time.monotonic() - t0, 1),
                      [str(o.log.relative_to(ctx.work)) for o in outcomes], reads)


# --- the gpu-labelled tests -----------------------------------------------------------

# The test properties the runner honours; a test with any other (DEPENDS,
# FIXTURES_*, ENVIRONMENT_MODIFICATION, ...) is refused when captured.
TEST_PROPERTIES = {"LABELS", "WORKING_DIRECTORY", "ENVIRONMENT", "TIMEOUT", "SKIP_RETURN_CODE",
                   "SKIP_REGULAR_EXPRESSION", "PASS_REGULAR_EXPRESSION",
                   "FAIL_REGULAR_EXPRESSION", "WILL_FAIL", "RUN_SERIAL", "PROCESSORS"}
PLACES = ("build", "source", "mpiexec")


def relocate(text, places):
    """A path-bearing string with the build's folders as "{build}",
    "{source}" and "{mpiexec}" (longest first: the build folder usually lies
    in the source folder)."""
    for name in sorted(places, key=lambda n: -len(places[n])):
        if places[name]:
            text = text.replace(places[name], "{" + name + "}")
    return text


def place(text, places):
    """The inverse of relocate() for this machine's folders."""
    for name in PLACES:
        text = text.replace("{" + name + "}", places[name])
    return text


def capture_tests(ctest_json, places, label="gpu"):
    """The tests labelled `label` of a `ctest --show-only=json-v1` document as
    a relocatable list (schema pipebench.gpu-tests/1). Raises UsageError
    naming the test and property the runner does not honour."""
    tests = []
    for t in ctest_json.get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if label not in (props.get("LABELS") or []):
            continue
        unknown = sorted(set(props) - TEST_PROPERTIES)
        if unknown:
            raise UsageError(f"test {t['name']}: property {unknown[0]} is not run by ci/gpu_check.py")
        if "command" not in t:
            raise UsageError(f"test {t['name']}: no command (a test of a target not built?)")
        env = dict(e.split("=", 1) for e in props.get("ENVIRONMENT", []))
        tests.append({
            "name": t["name"],
            "command": [relocate(a, places) for a in t["command"]],
            "cwd": relocate(props.get("WORKING_DIRECTORY", places["build"]), places),
            "env": {k: relocate(v, places) for k, v in env.items()},
            "timeout": props.get("TIMEOUT"),
            "skip_return_code": props.get("SKIP_RETURN_CODE"),
            "skip_regex": props.get("SKIP_REGULAR_EXPRESSION", []),
            "pass_regex": props.get("PASS_REGULAR_EXPRESSION", []),
            "fail_regex": props.get("FAIL_REGULAR_EXPRESSION", []),
            "will_fail": bool(props.get("WILL_FAIL", False)),
            "run_serial": bool(props.get("RUN_SERIAL", False)),
        })
    return {"schema": TESTS_SCHEMA, "label": label, "tests": tests}


def placed_tests(doc, places):
    """A captured list's tests with this machine's folders in place."""
    if doc.get("schema") != TESTS_SCHEMA:
        raise UsageError(f"test list: schema {doc.get('schema')!r}, expected {TESTS_SCHEMA}")
    out = []
    for t in doc["tests"]:
        t = dict(t)
        t["command"] = [place(a, places) for a in t["command"]]
        t["cwd"] = place(t["cwd"], places)
        t["env"] = {k: place(v, places) for k, v in t["env"].items()}
        out.append(t)
    return out


def ctest_places(build, root):
    cache = (build / "CMakeCache.txt").read_text(errors="replace")
    m = re.search(r"^MPIEXEC_EXECUTABLE:FILEPATH=(.*)$", cache, re.M)
    return {"build": str(build), "source": str(root), "mpiexec": m.group(1) if m else ""}


def capture_build_tests(build, root=ROOT):
    """`ctest --show-only=json-v1` of a configured build tree, captured."""
    try:
        p = subprocess.run(["ctest", "--test-dir", str(build), "--show-only=json-v1"],
                           capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        raise UsageError(f"ctest --show-only=json-v1 in {build}: no answer in"
                         f" {PROBE_SECONDS} s") from None
    if p.returncode != 0:
        raise UsageError(f"ctest --show-only=json-v1 in {build}: exit {p.returncode}:"
                         f" {p.stderr.strip()[:150]}")
    return capture_tests(json.loads(p.stdout), ctest_places(build, root))


def test_verdict(test, rc, output, timed_out):
    """A test's status as ctest decides it: "skipped" (its skip return code or
    skip expression), "passed" or "failed" (exit 0, or its pass expression;
    a fail expression fails; WILL_FAIL inverts)."""
    if timed_out:
        return "failed"
    if test["skip_return_code"] is not None and rc == test["skip_return_code"]:
        return "skipped"
    if any(re.search(r, output) for r in test["skip_regex"]):
        return "skipped"
    if test["pass_regex"]:
        ok = any(re.search(r, output) for r in test["pass_regex"])
    else:
        ok = rc == 0
    if any(re.search(r, output) for r in test["fail_regex"]):
        ok = False
    return "passed" if ok != test["will_fail"] else "failed"


def run_one_test(ctx, t, default_timeout, deadline):
    """One gpu test within its TIMEOUT (else default_timeout) and the step's
    deadline: "cut" (with why: "window", "budget" or "signal") when the
    deadline, the budget or a signal stopped it or left it no time to
    start, else its status as ctest decides it."""
    log = ctx.work / "logs" / "gpu-tests" / (re.sub(r"[^\w.-]", "_", t["name"]) + ".txt")
    Path(t["cwd"]).mkdir(parents=True, exist_ok=True)
    env = dict(ctx.env, **t["env"])
    o = run_command(ctx, t["name"], t["command"], t["timeout"] or default_timeout, log,
                    cwd=t["cwd"], env=env, deadline=deadline)
    if o.cut:
        status = "cut"
    elif o.rc is None:
        status = "failed"  # it could not start
    else:
        status = test_verdict(t, o.rc, log.read_text(errors="replace"), o.timed_out)
    r = {"name": t["name"], "status": status, "exit": o.rc, "seconds": round(o.seconds, 2),
         "log": str(log.relative_to(ctx.work))}
    if o.cut:
        r["cut"] = o.stopped_by
    return r


# Tests whose figures a neighbour's load would disturb (a planted slowdown's
# factor, GEMM throughput): the runner runs them alone, as RUN_SERIAL ones.
ALONE = re.compile(r"Plant|gemm_bench")


def runs_alone(test):
    return bool(test["run_serial"] or ALONE.search(test["name"]))


def test_order(tests, default_timeout):
    """The order the runner starts the tests in: those that may share the
    machine first, then those that run alone (runs_alone), each group
    longest TIMEOUT first (default_timeout where a test has none), so that
    the step's time in all cuts short tests rather than the long ones
    started last."""
    order = sorted(tests, key=lambda t: -(t["timeout"] or default_timeout))  # stable
    return ([t for t in order if not runs_alone(t)], [t for t in order if runs_alone(t)])


def run_tests(ctx, step, variables):
    """The gpu-labelled tests, in test_order: `jobs` at a time, then each of
    those that run alone by itself; each within its own TIMEOUT (else
    `limit`) and the step's `limit` in all; the results to gpu-tests.json.
    A test that `limit`, the budget or a signal stopped or left no time is
    "cut", neither passed nor failed."""
    results = []
    log = ctx.work / "logs" / "gpu-tests.txt"
    if ctx.tests is None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(ctx.tests_missing + "\n")
    else:
        limit = step.args["limit"]
        deadline = time.monotonic() + limit  # the step's limit in all
        shared, alone = test_order(ctx.tests, limit)
        with concurrent.futures.ThreadPoolExecutor(step.args["jobs"]) as pool:
            results += pool.map(lambda t: run_one_test(ctx, t, limit, deadline), shared)
        results += [run_one_test(ctx, t, limit, deadline) for t in alone]
        log.write_text("".join("%-8s %7.2f s  %s%s\n" % (
            r["status"], r["seconds"], r["name"], " (%s)" % r["cut"] if "cut" in r else "")
            for r in results))
    write_json(ctx.work / "gpu-tests.json", {"schema": "pipebench.gpu-tests-results/1",
                                             "missing": ctx.tests_missing, "tests": results})
    return [Outcome("gpu-tests", log, rc=0)]


EXECUTORS = {"commands": run_commands, "tests": run_tests}


# --- the pass rules -------------------------------------------------------------------


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_results(folder):
    """The result files (schema pipebench.result*) of a folder, by name."""
    rows = []
    for f in sorted(glob.glob(str(Path(folder) / "*.json"))):
        r = read_json(f)
        if isinstance(r, dict) and str(r.get("schema", "")).startswith("pipebench.result"):
            rows.append(r)
    return rows


def combination(r):
    return "%s x %s" % (r["config"]["schedule"], r["config"]["partition"])


def recorded(text, k, n):
    """" (in K of N results)" where only some results recorded a figure."""
    return text + (" (in %d of %d results)" % (k, n) if k < n else "")


def fast_paths(ok):
    """The fast paths the ok results ran, for the detail of a step's line:
    the GEMM epilogues (fused and refused GEMMs summed over the results, the
    first refusal's text), the CUDA graphs (units of work summed by how they
    ran, the eager reasons), the worst optimizer-update error of --check.
    A figure no result recorded (older files, a backend without it) is "not
    recorded" (None in the values). Figures only: no pass rule reads them."""
    text, values = "", {}
    gemms = [(r["metrics"]["gemm_epilogues"], combination(r)) for r in ok
             if r["metrics"].get("gemm_epilogues")]
    if gemms:
        refusals = [(g["first_refusal"], at) for g, at in gemms if g["first_refusal"]]
        e = values["gemm_epilogues"] = {
            "fused": sum(g["epilogue_gemms"] for g, _ in gemms),
            "refused": sum(g["refusals"] for g, _ in gemms),
            "first_refusal": refusals[0][0] if refusals else "",
            "first_refusal_at": refusals[0][1] if refusals else "", "recorded": len(gemms)}
        text += recorded("; GEMM epilogues %d fused, %d refused%s" % (
            e["fused"], e["refused"],
            " (first in %s: %s)" % (e["first_refusal_at"], e["first_refusal"]) if refusals else ""),
            len(gemms), len(ok))
    else:
        values["gemm_epilogues"] = None
        text += "; GEMM epilogues not recorded"
    graphs = [r["metrics"]["cuda_graphs"] for r in ok if r["metrics"].get("cuda_graphs")]
    if graphs:
        g = values["cuda_graphs"] = {
            k: sum(x[k] for x in graphs) for k in ("captured", "replayed", "rebuilt", "eager")}
        g["eager_reasons"] = sorted({x["eager_reason"] for x in graphs if x["eager"] > 0} - {""})
        g["recorded"] = len(graphs)
        text += recorded("; CUDA graphs %d captured, %d replayed, %d rebuilt, %d eager%s" % (
            g["captured"], g["replayed"], g["rebuilt"], g["eager"],
            " (%s)" % " / ".join(g["eager_reasons"]) if g["eager_reasons"] else ""),
            len(graphs), len(ok))
    else:
        values["cuda_graphs"] = None
        text += "; CUDA graphs not recorded"
    updates = [(c["update_rel_error"], combination(r)) for r in ok
               for c in [r["metrics"].get("check") or {}]
               if isinstance(c.get("update_rel_error"), (int, float))]
    if updates:
        worst = max(updates, key=lambda u: math.inf if math.isnan(u[0]) else u[0])  # NaN worst
        values["update_rel_error"] = {"max": worst[0], "max_at": worst[1],
                                      "recorded": len(updates)}
        text += recorded("; optimizer update max rel err %.1e (%s)" % worst,
                         len(updates), len(ok))
    else:
        values["update_rel_error"] = None
        text += "; optimizer update not recorded"
    return text, values


def kernel_family_shares(rows):
    """CUPTI's device time per kernel family (step.kernel_seconds_<family>:
    pipebench's own kernels by stem, cuBLAS's as gemm, what no family names
    as other), summed over the results' stages: [(family, share of all)],
    largest first; [] without CUPTI's figures."""
    per = {}
    for r in rows:
        step = (((r["metrics"].get("collectors") or {}).get("cupti") or {}).get("step") or {})
        for key, stages in step.items():
            if key.startswith("kernel_seconds_"):
                family = key[len("kernel_seconds_"):]
                per[family] = per.get(family, 0.0) + sum(
                    x for x in stages if x is not None and math.isfinite(x))
    total = sum(per.values())
    if total <= 0:
        return []
    return sorted(((f, t / total) for f, t in per.items()), key=lambda ft: (-ft[1], ft[0]))


def summarise_results(rows, bubble_within=None):
    """The figures of a folder of result files: ok and not ok, --check, the
    best samples/s, message paths, the fast paths that ran (fast_paths),
    the lowest and highest bubble, the largest kernel families' shares of
    the device time (kernel_family_shares), CUPTI's
    device bubble against the event bubble and how much of the action
    windows the device was busy, where it ran. Passes when there is an ok
    result, none is not ok (status other than ok or invalid) and every check
    passed; with bubble_within, every ok run must also have a device bubble
    within that of its event bubble."""
    ok = [r for r in rows if r["status"] == "ok"]
    bad = [combination(r) + ":" + r["status"] for r in rows if r["status"] not in ("ok", "invalid")]
    checks = [r["metrics"]["check"] for r in ok if r["metrics"].get("check")]
    failed = [combination(r) for r in ok
              if r["metrics"].get("check") and not r["metrics"]["check"]["passed"]]
    # null: a NaN or infinite error (the check failed), the worst there is.
    err = max([math.inf if c["max_rel_error"] is None else c["max_rel_error"] for c in checks]
              or [0])
    # Checks of two steps: also the first warm-up step (a device backend's
    # CUDA graphs against the reference's second step); absent in older files.
    two_steps = sum(1 for c in checks if c.get("steps") == 2)
    sps = max([r["metrics"]["samples_per_second"] for r in ok] or [0])
    paths = sorted({r["config"].get("message_path", "") for r in ok} - {""})
    values = {"ok": len(ok), "not_ok": bad, "checks": len(checks),
              "checks_passed": len(checks) - len(failed), "checks_failed": failed,
              "max_rel_error": None if math.isinf(err) else err, "checks_two_steps": two_steps,
              "best_samples_per_second": sps, "message_paths": paths}
    steps = ("" if not any("steps" in c for c in checks)
             else " over 2 steps" if two_steps == len(checks) else ", %d over 2 steps" % two_steps)
    out = "%d ok, %d not ok%s; check %d/%d passed%s (max rel err %.1e)%s; best %.0f samples/s" % (
        len(ok), len(bad), " " + ",".join(bad[:3]) if bad else "", len(checks) - len(failed),
        len(checks), steps, err, " FAILED " + ",".join(failed[:3]) if failed else "", sps)
    if paths:
        out += "; messages " + "/".join(paths)
    # Which attention ran (files before the field ran naive), and why naive.
    forms = sorted({(r["config"].get("attention", "naive"), r["config"].get("attention_reason", ""))
                    for r in ok})
    if forms:
        values["attention"] = [{"form": f, "reason": why} for f, why in forms]
        out += "; attention " + ", ".join(f + (" (%s)" % why if why else "") for f, why in forms)
    fast_text, fast_values = fast_paths(ok)
    out += fast_text
    values.update(fast_values)
    if ok:
        bub = sorted(ok, key=lambda r: r["metrics"]["bubble_ratio"]["measured"])
        lo, hi = (b["metrics"]["bubble_ratio"]["measured"] for b in (bub[0], bub[-1]))
        values["bubble"] = {"min": lo, "min_at": combination(bub[0]), "max": hi,
                            "max_at": combination(bub[-1])}
        out += "; bubble %.3f (%s) .. %.3f (%s)" % (lo, combination(bub[0]), hi, combination(bub[-1]))
    within = bubble_within if bubble_within is not None else 0.02
    dev = [(abs(r["metrics"]["device"]["bubble_ratio"] - r["metrics"]["bubble_ratio"]["measured"]),
            combination(r))
           for r in ok if (r["metrics"].get("device") or {}).get("bubble_ratio") is not None
           and not math.isnan(r["metrics"]["device"]["bubble_ratio"])]
    off = [n for d, n in dev if d >= within]
    if dev:
        worst = max(dev)
        values["device_bubble"] = {"max_abs_diff": worst[0], "max_at": worst[1],
                                   "within": len(dev) - len(off), "of": len(dev),
                                   "tolerance": within}
        out += "; device bubble vs events: max |diff| %.3f (%s), %d of %d within %g" % (
            worst[0], worst[1], len(dev) - len(off), len(dev), within)
        # Near 1 where the kernels keep the GPU fed (the two bubbles then
        # agree), far below it where launching is slower than the kernels
        # run (the windows hold idle device time the event bubble counts).
        fill = []
        for r in ok:
            for s, busy in enumerate((r["metrics"].get("device") or {}).get("busy_seconds_per_stage")
                                     or []):
                steps = sorted(r["metrics"]["busy_seconds_per_stage"][s])
                if steps and steps[len(steps) // 2] > 0:
                    fill.append(busy / steps[len(steps) // 2])
        if fill:
            values["device_busy_over_action"] = {"min": min(fill), "max": max(fill)}
            out += "; device busy / action time %.2f .. %.2f" % (min(fill), max(fill))
    families = kernel_family_shares(ok)
    if families:
        values["kernel_families"] = families
        out += "; kernels " + ", ".join("%s %.0f%%" % (f, 100 * share)
                                        for f, share in [fs for fs in families if fs[1] > 0][:5])
    env = ok[0]["environment"] if ok else {}
    if env.get("gpus"):
        values["device"] = env["gpus"][0]
        out += "; on %s (%d per GPU), CUDA %s, driver %s" % (
            env["gpus"][0], env.get("ranks_per_gpu", 0), env.get("cuda"), env.get("driver"))
    passed = ok and not bad and not failed and (
        bubble_within is None or (dev and not off))
    return Verdict("PASS" if passed else "FAIL", out, values)


def judge_results(ctx, step, reads, outcomes):
    return summarise_results(read_results(reads[0]), step.args.get("bubble_within"))


def judge_tests(ctx, step, reads, outcomes):
    """FAIL when a test failed; else CUT when the step's time, the budget or
    a signal stopped a test or left it no time (such a test neither passed
    nor failed); else PASS. Skips are not failures."""
    doc = read_json(reads[0]) or {}
    if doc.get("missing"):
        return Verdict("SKIP", doc["missing"])
    tests = doc.get("tests", [])
    by = {s: [t["name"] for t in tests if t["status"] == s]
          for s in ("passed", "skipped", "failed", "cut")}
    values = {s: len(n) for s, n in by.items()}
    values["failed_tests"] = by["failed"]
    values["cut_tests"] = by["cut"]
    if not tests:
        return Verdict("SKIP", "no gpu-labelled tests in this build", values)
    text = "%d tests: %d passed, %d skipped, %d failed" % (
        len(tests), values["passed"], values["skipped"], values["failed"])
    if by["cut"]:
        why = sorted({t.get("cut", "budget") for t in tests if t["status"] == "cut"})
        text += ", %d cut (%s: %s)" % (values["cut"], " or ".join(
            {"window": "the step's %s s" % step.args["limit"], "budget": "the time budget",
             "signal": "the check was stopped"}.get(w, w) for w in why),
            ", ".join(by["cut"][:3]) + (", ..." if len(by["cut"]) > 3 else ""))
    if by["failed"]:
        return Verdict("FAIL", text + " (failed: " + ", ".join(by["failed"][:3])
                       + "; logs/gpu-tests/)", values)
    if by["cut"]:
        return Verdict("CUT", text, values)
    return Verdict("PASS", text, values)


def load_memory_rule():
    path = ROOT / "bench" / "tests" / "plan_validate_memory.py"
    spec = importlib.util.spec_from_file_location("plan_validate_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.judge


def judge_memory(ctx, step, reads, outcomes):
    doc = read_json(reads[0])
    if not doc or not doc.get("combinations"):
        return Verdict("FAIL", "plan --validate predicted no combination (%s)" % reads[0].name)
    lines, failures = load_memory_rule()(doc, step.args["max_mean"], step.args["max_one"])
    values = {"combinations": len(doc["combinations"]),
              "mean_abs_error": doc["mean_abs_error"]["peak_memory_bytes"],
              "max_mean": step.args["max_mean"], "max_one": step.args["max_one"],
              "failures": failures}
    return Verdict("FAIL" if failures else "PASS", failures[0] if failures else lines[-1], values)


def judge_gemm(ctx, step, reads, outcomes):
    parts, values = [], {}
    for path in reads:
        d = read_json(path)
        if not d or d.get("schema") != "pipebench.gemm/1":
            return Verdict("FAIL", f"{path.name}: no pipebench.gemm/1 result")
        values[d["dtype"]] = {k: d[k] for k in ("backend_tflops", "cublas_tflops", "ratio", "device")}
        parts.append("%s: backend %.2f TFLOP/s, cuBLAS alone %.2f TFLOP/s, %.3f" % (
            d["dtype"], d["backend_tflops"], d["cublas_tflops"], d["ratio"]))
    return Verdict("PASS", "; ".join(parts), values)


def judge_unit_bench(ctx, step, reads, outcomes):
    """Passes when every file holds rows and none failed; the figures: per
    dtype the rows and one transformer layer's F, I and W (the sums over
    ln1 .. fc2) in microseconds, and beside a fused attention the naive
    one's F and I."""
    parts, values = [], {}
    for path in reads:
        d = read_json(path)
        rows = (d or {}).get("benchmarks") or []
        if not rows:
            return Verdict("FAIL", f"{path.name}: no Google Benchmark rows")
        failed = [r for r in rows if r.get("error_occurred")]
        if failed:
            return Verdict("FAIL", "%s: %s: %s" % (path.name, failed[0].get("name"),
                                                   failed[0].get("error_message")))
        dtype = path.stem.removeprefix("unit-bench-")
        us = {r["run_name"].removesuffix("/manual_time"):
              r["real_time"] * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[r["time_unit"]]
              for r in rows}
        layer = {p: sum(t for n, t in us.items() if n.endswith("/" + p) and n.split("/")[1]
                        in LAYER_KINDS) for p in "FIW"}
        values[dtype] = {"rows": len(rows), "layer_us": layer, "us": us}
        text = "%s: %d rows, a layer F %.1f us, I %.1f us, W %.1f us" % (
            dtype, len(rows), layer["F"], layer["I"], layer["W"])
        # Beside a fused attention, the naive kernels it replaces.
        pair = [(us.get("%s/attention/%s" % (dtype, p)), us.get("%s/attention_naive/%s" % (dtype, p)))
                for p in "FI"]
        if all(f is not None and n is not None for f, n in pair):
            text += "; attention F %.1f (naive %.1f) us, I %.1f (naive %.1f) us" % (
                pair[0][0], pair[0][1], pair[1][0], pair[1][1])
        parts.append(text)
    return Verdict("PASS", "; ".join(parts), values)


LAYER_KINDS = ("ln1", "qkv", "attention", "attn_out", "ln2", "fc1_gelu", "fc2")


def median_step(folder):
    ok = [r for r in read_results(folder) if r.get("status") == "ok"]
    return ok[0]["metrics"]["step_time_seconds"]["median"] if ok else None


def judge_cupti_cost(ctx, step, reads, outcomes):
    steps = [median_step(f) for f in reads]  # (nvtx, nvtx-cupti) per round
    pairs = list(zip(steps[0::2], steps[1::2]))
    if any(a is None or b is None for a, b in pairs):
        return Verdict("FAIL", "a run wrote no ok result (%s)" % ", ".join(
            str(f.relative_to(ctx.work)) for f, s in zip(reads, steps) if s is None))
    ratios = [b / a for a, b in pairs]
    return Verdict("PASS", "step with / without CUPTI: %s (median steps %s ms)" % (
        ", ".join("%.3f" % x for x in ratios),
        ", ".join("%.2f/%.2f" % (b * 1e3, a * 1e3) for a, b in pairs)),
        {"ratios": ratios, "median_step_seconds": [{"without": a, "with": b} for a, b in pairs]})


def p2p_figures(d):
    """Per transport: algbw at the largest size against its baseline, or why
    it was skipped; then the wrong bytes."""
    out = []
    for t in d["transports"]:
        if not t["results"]:
            out.append("%s skipped (%s)" % (t["transport"], t["skipped"][:60]))
            continue
        r = t["results"][-1]
        if "algbw_GBps" in r:
            out.append("%s %s %.1f GB/s vs %s %.1f" % (
                t["transport"], t["path"], r["algbw_GBps"], t["baseline"], r["baseline_algbw_GBps"]))
        else:
            out.append("%s %.1f GB/s" % (t["baseline"], r["baseline_algbw_GBps"]))
    first = d["transports"][0]["results"] if d["transports"] else []
    return ("%s B: " % first[-1]["bytes"] if first else "") + "; ".join(out) + "; %d wrong" % d["wrong"]


def read_p2p(path):
    d = read_json(path)
    if not d or d.get("schema") != "pipebench.p2p-device/1":
        return None
    return d


def judge_p2p(ctx, step, reads, outcomes):
    d = read_p2p(reads[0])
    if d is None:
        return Verdict("FAIL", f"{reads[0].name}: no pipebench.p2p-device/1 result")
    return Verdict("PASS" if d["wrong"] == 0 else "FAIL", p2p_figures(d), {"wrong": d["wrong"]})


def judge_peer(ctx, step, reads, outcomes):
    """Per transport at the largest size: algbw with the default wait and
    with --wait block, and their ratio; passes with no wrong byte."""
    docs = [read_p2p(p) for p in reads]
    if any(d is None for d in docs):
        return Verdict("FAIL", "no pipebench.p2p-device/1 result in " + ", ".join(
            p.name for p, d in zip(reads, docs) if d is None))
    base, block = ({t["transport"]: t["results"][-1] for t in d["transports"] if t["results"]}
                   for d in docs)
    parts, values = [], {}
    for name in [n for n in base if n in block and "algbw_GBps" in base[n]]:
        a, b = base[name]["algbw_GBps"], block[name]["algbw_GBps"]
        values[name] = {"default_GBps": a, "block_GBps": b, "block_over_default": b / a if a else None}
        parts.append("%s %.1f vs %.1f GB/s (%.2f)" % (name, a, b, b / a if a else float("nan")))
    wrong = sum(d["wrong"] for d in docs)
    values["wrong"] = wrong
    ok = wrong == 0 and parts
    return Verdict("PASS" if ok else "FAIL", "; ".join(parts or ["no transport measured"])
                   + "; %d wrong" % wrong, values)


def peer_figures(case, doc):
    """One case of the torch peer step, short: the ratio the pass rule reads
    first, then the figures it comes from."""
    pb, pt, r = doc["pipebench"], doc["pytorch"], doc["ratios"]
    if doc.get("graph"):
        return "%s %s per micro-batch %.2fx PyTorch's CUDA-graph replay (%.2f vs %.2f ms;" \
               " eager %.2f ms)" % (doc["model"]["name"], doc["model"]["dtype"],
                                   r["per_microbatch_over_graph"],
                                   pb["per_microbatch_seconds"] * 1e3,
                                   doc["graph"]["per_microbatch_seconds"] * 1e3,
                                   pt["per_microbatch_seconds"] * 1e3)
    sdpa = (pt.get("kernels") or {}).get("sdpa")
    return "%s %.2fx samples/s (%.1f vs %.1f%s), peak %s vs %s" % (
        case, r["samples_per_second"], pb["samples_per_second"], pt["samples_per_second"],
        ", PyTorch's sdpa " + sdpa if sdpa else "",
        torch_peer.gib(pb["peak_device_bytes"]), torch_peer.gib(pt["peak_allocated_bytes"]))


def peer_verdict(docs, min_ratio, max_over_graph):
    """The torch peer rule over {case: pipebench.torch-peer/1 document}:
    without a graph, samples/s at least min_ratio of PyTorch's and a device
    peak no higher than PyTorch's max_memory_allocated; with one, the time
    per micro-batch at most max_over_graph of the graph replay's. A
    criterion whose PyTorch side is missing (its document skipped, or
    PyTorch could not capture its own step in a CUDA graph) is not
    measured: never a pass, and no failure of pipebench's. FAIL when a
    measured criterion is not met (BELOW: ...); else SKIP when one was not
    measured (NOT MEASURED: ..., each case's figures saying why), or with
    the reason alone when every document is skipped; else PASS."""
    skipped = [d for d in docs.values() if d["status"] != "ok"]
    if skipped and len(skipped) == len(docs):
        return Verdict("SKIP", skipped[0]["reason"])
    parts, short, unmeasured, values = [], [], [], {}
    for case, d in docs.items():
        if d["status"] != "ok":
            parts.append("%s not measured: PyTorch skipped (%s)" % (case, d["reason"]))
            unmeasured.append(case)
            continue
        r = d["ratios"]
        values[case] = {"ratios": r, "pipebench": d["pipebench"], "pytorch": d["pytorch"],
                        "graph": d["graph"], "torch": d["torch"]}
        if d["graph"] and "error" in d["graph"]:
            parts.append("%s %s per micro-batch not measured against PyTorch's CUDA-graph replay:"
                         " PyTorch could not capture its own step (%s); pipebench %.2f ms,"
                         " PyTorch eager %.2f ms" % (
                             d["model"]["name"], d["model"]["dtype"], d["graph"]["error"],
                             d["pipebench"]["per_microbatch_seconds"] * 1e3,
                             d["pytorch"]["per_microbatch_seconds"] * 1e3))
            unmeasured.append(case + " per micro-batch over the graph replay")
            continue
        parts.append(peer_figures(case, d))
        if d["graph"]:
            if r["per_microbatch_over_graph"] > max_over_graph:
                short.append("%s %.2fx > %gx the graph replay" % (
                    case, r["per_microbatch_over_graph"], max_over_graph))
        else:
            if r["samples_per_second"] < min_ratio:
                short.append("%s %.2fx < %gx samples/s" % (case, r["samples_per_second"], min_ratio))
            # PyTorch's peak is always measured: no ratio means pipebench's
            # result has no device peak, which is pipebench's failure.
            if r["peak_memory"] is None or r["peak_memory"] > 1.0:
                short.append("%s peak %s" % (case, "unmeasured" if r["peak_memory"] is None
                                             else "%.2fx PyTorch's" % r["peak_memory"]))
    values["below"] = short
    values["unmeasured"] = unmeasured
    status = "FAIL" if short else "SKIP" if unmeasured else "PASS"
    return Verdict(status, "; ".join(parts) + ("; BELOW: " + ", ".join(short) if short else "")
                   + ("; NOT MEASURED: " + ", ".join(unmeasured) if unmeasured else ""), values)


def judge_torch_peer(ctx, step, reads, outcomes):
    bad = [o for o in outcomes if o.rc not in (0, torch_peer.EXIT_SKIPPED)]
    if bad:
        return Verdict("FAIL", "; ".join("%s: exit %s (%s)" % (o.tag, o.rc, first_error(
            o.log, r"error|torch_peer:|Traceback")) for o in bad[:2]))
    docs = {}
    for path in reads:
        d = read_json(path)
        if not d or d.get("schema") != torch_peer.SCHEMA:
            return Verdict("FAIL", f"{path.name}: no {torch_peer.SCHEMA} document")
        docs[path.stem] = d
    return peer_verdict(docs, step.args["min_ratio"], step.args["max_over_graph"])


def judge_sanitizer(ctx, step, reads, outcomes):
    # compute-sanitizer writes no result file: each tool's exit status is its
    # verdict (9 for errors found), its printed summary the figures.
    # A tool that cannot attach (sandboxed runtimes such as gVisor hide what
    # the sanitizer needs) skips only where no other tool found errors.
    clean, failed, detached = [], [], []
    for run, o in zip(step.runs, outcomes):
        tool = run.tag.split("-", 1)[1]
        if o.rc == 0:
            clean.append("%s (%s)" % (tool, first_error(o.log, r"ERROR SUMMARY: \d+ error")))
            continue
        attach = first_error(o.log, r"device not supported")
        if attach:
            detached.append("%s: %s" % (tool, attach[:100]))
            continue
        failed.append("%s: exit %s, %s" % (
            tool, o.rc, first_error(o.log, r"ERROR SUMMARY|Invalid|Race|Barrier|error")))
    values = {"clean": [c.split(" ")[0] for c in clean], "failed": failed,
              "not_attached": [d.split(":")[0] for d in detached]}
    if failed:
        return Verdict("FAIL", "%s: %s%s" % (step.args["what"], "; ".join(failed), "".join(
            "; %s cannot attach here" % d.split(":")[0] for d in detached)), values)
    if detached:
        return Verdict("SKIP", "compute-sanitizer cannot attach here: " + detached[0], values)
    return Verdict("PASS", "%s: clean under %s" % (step.args["what"], ", ".join(clean)), values)


def junit_cases(path):
    """The test cases of `pipebench report --junit`'s file (the report's
    machine-readable verdict): per case its name, classname and the text of
    its failure, error, skipped and system-out ("" where absent); None when
    the file is missing or not XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    cases = []
    for c in root.iter("testcase"):
        case = {"name": c.get("name", ""), "classname": c.get("classname", "")}
        for tag in ("failure", "error", "skipped", "system-out"):
            e = c.find(tag)
            case[tag] = "" if e is None else (e.text or e.get("message") or tag)
        cases.append(case)
    return cases


def combination_label(case):
    """A report case's combination ("1f1b x layer P=2 M=4"): its name
    before the model and the plant in brackets."""
    return case["name"].split(" [")[0]


def gate_figures(cases):
    """What a night's report says, from its JUnit cases: the combinations,
    those the gate compared with the baseline (not new to it, not missing
    from tonight), the regressions (a failure: combinations and health
    figures alike), the failed --checks, the undecidable ones, the run
    errors and the missing."""
    combos = [c for c in cases if c["classname"] != "pipebench.health"]
    missing = [c for c in combos if c["skipped"].startswith("missing:")]
    new = [c for c in combos if "new combination" in c["system-out"]]
    # A failed --check is a failure of its own kind, its line first, before
    # any regression's.
    checks = [c for c in combos if c["failure"].startswith("--check failed")]
    regressed = [c for c in cases if any(not line.startswith("--check failed")
                                         for line in c["failure"].splitlines())]
    return {"combinations": len(combos) - len(missing),
            "compared": len(combos) - len(missing) - len(new),
            "regressions": [c["name"] for c in regressed],
            "checks_failed": [combination_label(c) for c in checks],
            "undecidable": [combination_label(c) for c in combos
                            if c["skipped"] and not c["failure"] and c not in missing],
            "errors": [combination_label(c) for c in combos if c["error"]],
            "missing": [combination_label(c) for c in missing]}


def night_verdict(name, outcome, cases, want_exit):
    """One night's problems (empty when it is as expected): its exit status
    (0 clean, 1 a regression, 2 bad input, 3 a sweep's job failed) and its
    report's file."""
    if cases is None:
        return [f"{name}: no report.junit.xml (exit {outcome.rc}: {first_error(outcome.log)})"]
    g = gate_figures(cases)
    bad = [f"{name}: exit {outcome.rc}, expected {want_exit}"] if outcome.rc != want_exit else []
    if not g["combinations"]:
        bad.append(f"{name}: no cuda combination in its report")
    if g["errors"]:
        bad.append(f"{name}: run errors in {', '.join(g['errors'][:3])}")
    if g["checks_failed"]:
        bad.append(f"{name}: --check failed in {', '.join(g['checks_failed'][:3])}")
    return bad


def nights_validation(doc, model, max_samples, max_memory):
    """`plan --validate --format json` over the nights, on `model`'s
    combinations: (text, values, problems). Samples/s: the mean absolute
    error within max_samples, or not predicted with the planner's reason
    (ranks sharing one GPU); peak memory: the mean within max_memory."""
    if not doc or doc.get("schema") != "pipebench.plan-validation/1":
        return "plan --validate: no pipebench.plan-validation/1 document", {}, [
            "plan --validate wrote no document (nights-validate.json)"]
    rows = [r for r in doc["combinations"] if r["config"]["model"] == model]
    if not rows:
        return f"plan --validate: no {model} combination", {}, [
            f"plan --validate predicted no {model} combination"]
    # A row that measured no peak has no memory error (null).
    mems = [abs(r["error"]["peak_memory_bytes"]) for r in rows
            if r["error"]["peak_memory_bytes"] is not None]
    if not mems:
        return f"plan --validate: no {model} combination measured a peak", {}, [
            f"plan --validate: no {model} combination measured a peak"]
    mem = sum(mems) / len(mems)
    sps = [abs(r["error"]["samples_per_second"]) for r in rows
           if r["error"]["samples_per_second"] is not None]
    values = {"model": model, "combinations": len(rows), "mean_abs_memory_error": mem,
              "mean_abs_samples_error": sum(sps) / len(sps) if sps else None,
              "refused": doc.get("refused", [])}
    problems = []
    if sps:
        s_text = "samples/s mean |error| %.1f%% (at most %g%%)" % (
            100 * values["mean_abs_samples_error"], 100 * max_samples)
        if values["mean_abs_samples_error"] > max_samples:
            problems.append("plan --validate: samples/s error %.1f%% beyond %g%%" % (
                100 * values["mean_abs_samples_error"], 100 * max_samples))
    elif values["refused"]:
        s_text = "samples/s not predicted: " + values["refused"][0]
    else:
        s_text = "samples/s not predicted, without a reason"
        problems.append("plan --validate predicted no samples/s and gave no reason")
    if mem > max_memory:
        problems.append("plan --validate: memory error %.2f%% beyond %g%%" % (
            100 * mem, 100 * max_memory))
    text = "plan --validate on %s (%d combinations): %s; peak memory mean |error| %.2f%%" \
           " (at most %g%%)" % (model, len(rows), s_text, 100 * mem, 100 * max_memory)
    return text, values, problems


HEALTH_FIGURES = ("gemm_bf16_tflops", "gemm_fp32_tflops", "copy_d2d_gbps", "copy_h2d_gbps",
                  "copy_d2h_gbps")


def nights_health(docs, gemms, within):
    """The health probe's figures of the nights (pipebench.health/1: each
    figure's samples of the first GPU, pooled over the nights, their
    median) beside ppb_gemm_bench's backend TFLOP/s of this check (gemms:
    {dtype: pipebench.gemm/1}, empty when its gemm step did not run):
    (text, values, problems). The probe's GEMM figure is the same function
    as the bench's backend column, so they must agree within `within`
    where they measured the same model. No step of this check times the
    same copies (p2p and peer time transports between ranks): the copy
    figures are for reading."""
    docs = [d for d in docs if d and d.get("schema") == "pipebench.health/1" and d.get("gpus")]
    if not docs:
        return "no health probe file (nights/1/health/health.json)", {}, [
            "the nights wrote no health probe figures"]
    med = {}
    for f in HEALTH_FIGURES:
        xs = [x for d in docs for x in d["gpus"][0]["figures"].get(f, [])]
        if xs:
            med[f] = statistics.median(xs)
    model = docs[0]["config"]["model"]
    text = "health (%s, %s): GEMM bf16 %.2f, fp32 %.2f TFLOP/s; copies d2d %.0f, h2d %.0f," \
           " d2h %.0f GB/s" % (docs[0]["gpus"][0]["name"], model,
                               *(med.get(f, float("nan")) for f in HEALTH_FIGURES))
    values, problems = {"median": med, "model": model}, []
    if not gemms:
        return text + "; ppb_gemm_bench: not run in this check (select gemm)", values, problems
    parts = []
    for dtype, g in sorted(gemms.items()):
        h = med.get("gemm_%s_tflops" % dtype)
        if g.get("model") != model or h is None:
            parts.append("%s not compared (the probe's %s, the bench's %s)" % (
                dtype, model, g.get("model")))
            continue
        ratio = h / g["backend_tflops"]
        values["gemm_%s_over_bench" % dtype] = ratio
        parts.append("%s %.3f of ppb_gemm_bench's %.2f" % (dtype, ratio, g["backend_tflops"]))
        if abs(ratio - 1) > within:
            problems.append("health GEMM %s %.3f of ppb_gemm_bench's, beyond %g%%" % (
                dtype, ratio, 100 * within))
    return text + "; GEMM " + ", ".join(parts), values, problems


def judge_nights(ctx, step, reads, outcomes):
    """Night 1 clean, night 2 gated against it with no regression (and
    something compared), the planted night a regression naming the
    combination and the planted stage (exit 1); then plan --validate and
    the health probe (nights_validation, nights_health). Reads the
    reports' JUnit XML, the planner's and the probe's JSON and, written
    during this check, ppb_gemm_bench's JSON."""
    n1, n2, planted, validate = reads[:4]
    o = {x.tag: x for x in outcomes}
    cases = [junit_cases(d / "report.junit.xml") for d in (n1, n2, planted)]
    problems = night_verdict("night 1", o["nights-1"], cases[0], 0)
    problems += night_verdict("night 2", o["nights-2"], cases[1], 0)
    problems += night_verdict("planted", o["nights-planted"], cases[2], 1)
    values, parts = {}, []
    if cases[1] is not None:
        g = values["night2"] = gate_figures(cases[1])
        parts.append("night 2 against night 1: %d regressions, %d of %d compared (%d undecidable)"
                     % (len(g["regressions"]), g["compared"], g["combinations"],
                        len(g["undecidable"])))
        if g["regressions"]:
            problems.append("night 2: regressions in " + ", ".join(g["regressions"][:3]))
        if g["missing"]:
            problems.append("night 2: missing " + ", ".join(g["missing"][:3]))
        if not g["compared"]:
            problems.append("night 2: no combination compared with night 1")
    if cases[2] is not None:
        stage = expand("{plant}", step_vars(ctx.vars(), step)).split(":")[0]
        combos = [c for c in cases[2] if c["classname"] != "pipebench.health"]
        caught = sorted({combination_label(c) for c in combos if c["failure"]
                         and "[planted stage %s " % stage in c["name"]
                         and re.search(r"\bstage %s\b" % stage, c["failure"])})
        values["planted"] = {"stage": int(stage), "caught": caught, "combinations": len(combos)}
        parts.append("planted: %d of %d combinations a regression naming stage %s%s" % (
            len(caught), len(combos), stage, " (%s)" % ", ".join(caught[:3]) if caught else ""))
        if not caught:
            why = [c["skipped"] for c in combos if c["skipped"]]
            problems.append(f"planted: no regression naming stage {stage}" + (
                " (%d undecidable: %s)" % (len(why), why[0][:150]) if why else ""))
    a = step.args
    for text, v, bad, key in (
            nights_validation(read_json(validate), expand("{validate_model}", step_vars(
                ctx.vars(), step)), a["max_samples_error"], a["max_memory_error"]) + ("validate",),
            nights_health([read_json(d / "health" / "health.json") for d in (n1, n2)],
                          fresh_gemms(ctx, reads[4:]), a["gemm_within"]) + ("health",)):
        parts.append(text)
        values[key] = v
        problems += bad
    values["problems"] = problems
    return Verdict("FAIL" if problems else "PASS", "; ".join(
        parts + (["FAILED: " + "; ".join(problems)] if problems else [])), values)


def fresh_gemms(ctx, paths):
    """{dtype: pipebench.gemm/1} of the files this check's gemm step wrote
    (not those an earlier check left in the work folder)."""
    out = {}
    for path in paths:
        d = read_json(path)
        if d and d.get("schema") == "pipebench.gemm/1" and path.stat().st_mtime >= ctx.wall_start:
            out[d["dtype"]] = d
    return out


JUDGES = {"results": judge_results, "tests": judge_tests, "memory": judge_memory,
          "gemm": judge_gemm, "cupti_cost": judge_cupti_cost, "p2p": judge_p2p,
          "peer": judge_peer, "torch_peer": judge_torch_peer, "sanitizer": judge_sanitizer,
          "unit_bench": judge_unit_bench, "nights": judge_nights}


# --- the summary and the archive ------------------------------------------------------


def result_word(results):
    """"failed" when a step failed, "cut" when the budget stopped one and none
    failed, else "passed"."""
    statuses = {r.status for r in results}
    return "failed" if "FAIL" in statuses else "cut" if "CUT" in statuses else "passed"


def summary_text(results, started, seconds, logs_at, budget, current=None, pending=None,
                 stopped="", final=True, archive=None):
    """The summary for people: a line per step, the archive's line, and
    RESULT. While the check runs (final False) the step running now and
    RESULT: RUNNING with the steps not reached yet; `stopped`, the signal
    that stopped the check."""
    lines = ["== pipebench gpu-check: %s, %.0f s ==" % (started, seconds)]
    lines += ["%-5s %-11s %s" % (r.status, r.name, r.figures) for r in results]
    if current and not final:
        lines.append("%-5s %-11s running for %.0f s%s" % (
            "RUN", current["name"], current["seconds"],
            " (limit %d s)" % current["limit"] if current.get("limit") else ""))
    if archive:
        lines.append("archive: " + archive_line(archive))
    if not final:
        lines.append("RESULT: RUNNING: this file is rewritten after every step; not reached yet:"
                     " %s" % (", ".join(pending) if pending else "none"))
        return "\n".join(lines) + "\n"
    word = result_word(results)
    if word == "failed":
        failed = list(dict.fromkeys(r.name for r in results if r.status == "FAIL"))
        lines.append("RESULT: FAILED: %s (logs in %s/logs, and in the archive)%s" % (
            ", ".join(failed), logs_at, "; %s stopped the check" % stopped if stopped else ""))
    elif word == "cut" and stopped:
        lines.append("RESULT: INCOMPLETE: %s stopped the check: the step it stopped and those"
                     " after it are CUT" % stopped)
    elif word == "cut":
        lines.append("RESULT: INCOMPLETE: the time budget (PPB_GPU_CHECK_SECONDS=%g) or a step's"
                     " own time in all stopped a step or left it no time (CUT)" % budget)
    else:
        unmeasured = not_measured(results)
        lines.append("RESULT: passed (skips say why)%s" % (
            "; not measured: " + ", ".join(unmeasured) if unmeasured else ""))
    return "\n".join(lines) + "\n"


def not_measured(results):
    """The criteria a step could not measure (the torch peer's, where PyTorch
    could not run a case): skipped, neither met nor missed, and named in
    the result beside "passed"."""
    return ["%s: %s" % (r.name, c) for r in results for c in (r.values or {}).get("unmeasured", [])]


def summary_json(results, started, seconds, budget, current=None, pending=None, stopped="",
                 final=True, work=None, archive=None):
    """The summary for machines (schema pipebench.gpu-check/1): `result` is
    "running" until the check ends, then passed, failed or cut."""
    return {"schema": SUMMARY_SCHEMA, "started": started, "seconds": round(seconds, 1),
            "budget_seconds": budget, "result": result_word(results) if final else "running",
            "stopped_by": stopped or None, "current": None if final else current,
            "pending": [] if final else list(pending or []),
            "not_measured": not_measured(results),
            "work": str(work) if work else None, "archive": archive,
            "steps": [dataclasses.asdict(r) for r in results]}


def write_text(path, text):
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path, doc):
    write_text(path, json.dumps(doc, indent=1) + "\n")


# What comes back from a GPU machine is OUT's few files: the summary and one
# archive of the work folder, without the traces (Perfetto's merged file and
# the per-rank folder of --trace, Nsight's reports), any file over HUGE_BYTES,
# and, while the archive is over ARCHIVE_LIMIT, the largest files left.
ARCHIVE_NAME = "gpu-check-work.tar.gz"
ARCHIVE_LIMIT = 15 * 2**20
HUGE_BYTES = 8 * 2**20
TRACE_SUFFIXES = (".trace", ".trace.json", ".nsys-rep", ".qdrep", ".qdstrm", ".ncu-rep", ".sqlite")
LEFT_OUT_NAME = "archive-left-out.txt"  # in the archive: what it does not hold, and why
WORK_MARK = ".ppb-gpu-check-work"  # in the work folder: an earlier check's, to be emptied


def is_trace(rel):
    return rel.name.endswith(TRACE_SUFFIXES) or any(p.endswith(".trace") for p in rel.parts[:-1])


def add_member(t, path, arcname, most):
    """The file at `path` (its first `most` bytes) into tar `t` as
    `arcname`, read before its header is written: a log that grows or is
    cut short meanwhile cannot break the stream (tarfile's own add writes
    the size it found and then fails mid-member). 1 where added, 0 where
    the file cannot be read (gone meanwhile)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read(most)
    except OSError:
        return 0
    info = tarfile.TarInfo(arcname)
    info.size, info.mtime, info.mode = len(data), int(st.st_mtime), st.st_mode & 0o777
    t.addfile(info, io.BytesIO(data))
    return 1


def pack_work(work, archive, skip=(), limit=ARCHIVE_LIMIT, huge=HUGE_BYTES):
    """Packs the work folder's files (not those under `skip`) into `archive`
    (gzip tar, paths relative to the folder), leaving out the traces
    (is_trace), any file over `huge` bytes and, while the archive is over
    `limit` bytes, the largest files left; the member LEFT_OUT_NAME lists
    what was left out and why. Written beside `archive` and renamed over
    it. Returns the archive's figures for the summary."""
    work = Path(work)
    skip = [Path(x).resolve() for x in skip]
    keep, traces, big = [], [], []
    for dirpath, dirnames, filenames in os.walk(work):
        here = Path(dirpath).resolve()
        if any(here == x or x in here.parents for x in skip):
            dirnames[:] = []
            continue
        for name in filenames:
            f = Path(dirpath) / name
            rel = f.relative_to(work)
            try:
                if f.is_symlink() or not f.is_file() or rel.name == WORK_MARK:
                    continue
                size = f.stat().st_size
            except OSError:
                continue
            (traces if is_trace(rel) else big if size > huge else keep).append((rel, size))
    over = []
    largest = sorted(keep, key=lambda x: -x[1])
    tmp = archive.with_name(archive.name + ".tmp")
    while True:
        kept = sorted(largest)
        left_out = "".join("%-10s %12d  %s\n" % (why, size, rel) for why, group in (
            ("trace", traces), ("over-%dMiB" % (huge >> 20), big),
            ("archive-full", over)) for rel, size in sorted(group))
        with tarfile.open(tmp, "w:gz", compresslevel=6) as t:
            members = 0
            for rel, _ in kept:
                members += add_member(t, work / rel, str(rel), huge)
            data = left_out.encode() or b"nothing\n"
            info = tarfile.TarInfo(LEFT_OUT_NAME)
            info.size, info.mtime = len(data), int(time.time())
            t.addfile(info, io.BytesIO(data))
        size = tmp.stat().st_size
        if size <= limit or not largest:
            break
        # Leave out the largest files, about the share the archive is over.
        target = sum(x[1] for x in largest) * (1 - limit / size)
        dropped = 0
        while largest and (dropped < target or not dropped):
            over.append(largest.pop(0))
            dropped += over[-1][1]
    tmp.replace(archive)
    return {"file": archive.name, "bytes": size, "members": members,
            "left_out": {"traces": len(traces), "trace_bytes": sum(x[1] for x in traces),
                         "huge": [{"path": str(r), "bytes": b} for r, b in sorted(big)],
                         "archive_full": [{"path": str(r), "bytes": b} for r, b in sorted(over)]}}


def archive_line(a):
    if "error" in a:
        return "%s not written: %s" % (a["file"], a["error"])
    lo = a["left_out"]
    parts = ["%d traces (%.1f MiB)" % (lo["traces"], lo["trace_bytes"] / 2**20)] if lo["traces"] else []
    if lo["huge"]:
        parts.append("%d files over %d MiB" % (len(lo["huge"]), HUGE_BYTES >> 20))
    if lo["archive_full"]:
        parts.append("%d largest files (the archive's %d MiB): %s" % (
            len(lo["archive_full"]), ARCHIVE_LIMIT >> 20,
            ", ".join(x["path"] for x in lo["archive_full"][:3])))
    return "%s, %d file%s, %.1f MiB%s" % (
        a["file"], a["members"], "" if a["members"] == 1 else "s", a["bytes"] / 2**20,
        "; left out (%s): %s" % (LEFT_OUT_NAME, "; ".join(parts)) if parts else "")


# --- the run: its summary after every step, and a signal's stop -----------------------


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_GRACE_SECONDS = 5  # a signal's SIGTERM to the running commands, then SIGKILL


class Session:
    """The run: the context, the table it runs, the summary lines so far
    (printed as they come) and what runs now. The summary in OUT is
    rewritten when a step starts and after it ends, with the archive of
    the work folder after each step that ran."""

    def __init__(self, ctx, steps=STEPS):
        self.ctx = ctx
        self.steps = steps
        self.results = []
        self.reached = set()  # ids of the table's steps run, skipped or absent here
        self.current = None  # {"name", "start", "limit"}: the step or the setup phase running
        self.current_step = None
        self.archive = None
        self.wheels = []
        self.started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")

    def note(self, status, name, figures, **extra):
        r = StepResult(name, status, figures, **extra)
        self.results.append(r)
        print(">> %s %s %s" % (status, name, figures), flush=True)
        return r

    def exists(self, step):
        try:
            return not step.only or CONDITIONS[step.only](self.ctx)
        except Exception:  # noqa: BLE001 - the step is then listed, and its run says why
            return True

    def pending(self):
        return [st.name for st in self.steps if id(st) not in self.reached
                and st is not self.current_step and self.ctx.selects(st) and self.exists(st)]

    def phase(self, name):
        """A part of the setup (probe, bundle, list) now runs: a signal then
        cuts it by that name."""
        self.current = {"name": name, "start": time.monotonic(), "limit": None} if name else None
        self.current_step = None
        if name:
            self.checkpoint(pack=False)

    def begin(self, step, limit):
        print(">> start %s (limit %d s, budget left %.0f s)" % (step.name, limit,
                                                                 max(0.0, self.ctx.left())),
              flush=True)
        self.current = {"name": step.name, "start": time.monotonic(), "limit": limit}
        self.current_step = step
        self.checkpoint(pack=False)

    def end(self, step, r):
        ran = self.current_step is step
        self.current, self.current_step = None, None
        self.reached.add(id(step))
        if r is not None:
            self.results.append(r)
            # Recorded: a signal may interrupt the packing below again.
            self.ctx.in_step = False
            print(">> %s %s %s" % (r.status, r.name, r.figures), flush=True)
            # Nothing to pack again where no command of it started (a step
            # the spent budget cuts before it starts).
            # After a signal, finish() packs once.
            started = ran and not (r.status in ("CUT", "SKIP") and "not started" in r.figures)
            self.checkpoint(pack=started and not self.ctx.stopping)

    def stopped(self, signame):
        """A signal stopped the check: the step (or setup phase) running is
        CUT, so is every step not reached that would have run."""
        ctx = self.ctx
        if self.current:
            secs = time.monotonic() - self.current["start"]
            self.note("CUT", self.current["name"], "stopped by %s after %.0f s" % (signame, secs),
                      seconds=round(secs, 1))
            if self.current_step is not None:
                self.reached.add(id(self.current_step))
            self.current, self.current_step = None, None
        for st in self.steps:
            if id(st) in self.reached:
                continue
            self.reached.add(id(st))
            if not self.exists(st):
                continue
            self.results.append(
                StepResult(st.name, "CUT", f"not started: the check was stopped ({signame})")
                if ctx.selects(st) else StepResult(st.name, "SKIP", NOT_SELECTED))

    def checkpoint(self, pack=True, final=False):
        """Writes OUT's summary (gpu-check.txt, gpu-check.json); with `pack`
        also the archive of the work folder, between two writes of the
        summary, so that a kill while packing leaves the summary current;
        returns the text."""
        ctx = self.ctx
        if pack:
            self.checkpoint(pack=False, final=final)
            try:
                self.archive = pack_work(ctx.work, ctx.out / ARCHIVE_NAME, skip=[ctx.out])
            except Exception as e:  # noqa: BLE001 - a full disk must not end the check
                self.archive = {"file": ARCHIVE_NAME, "error": "%s: %s" % (type(e).__name__, e)}
        now = time.monotonic()
        current = None if self.current is None else {
            "name": self.current["name"], "seconds": round(now - self.current["start"], 1),
            "limit": self.current["limit"]}
        pending = [] if final else self.pending()
        common = dict(current=current, pending=pending, stopped=ctx.stopping, final=final,
                      archive=self.archive)
        text = summary_text(self.results, self.started, now - ctx.start, ctx.work, ctx.budget,
                            **common)
        try:
            write_text(ctx.out / "gpu-check.txt", text)
            write_json(ctx.out / "gpu-check.json", summary_json(
                self.results, self.started, now - ctx.start, ctx.budget, work=ctx.work,
                **common))
        except OSError as e:
            print(f"gpu-check: the summary could not be written in {ctx.out}: {e}", flush=True)
        return text

    def finish(self):
        self.ctx.finishing = True
        text = self.checkpoint(final=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0 if result_word(self.results) == "passed" else 1


def stop_handler(s):
    """SIGTERM or SIGINT: the running commands stopped (they run in sessions
    of their own, out of reach of a signal to the check's group), then
    Stopped raised in the main thread, unless the final summary is being
    written or a step runs: that step's commands then return, the step is
    judged on what finished, and run_steps raises Stopped after it. A
    second signal only stops commands again."""
    ctx = s.ctx

    def handler(signum, frame):
        name = signal.Signals(signum).name
        first = not ctx.stopping
        if first:
            ctx.stopping = name
            os.write(1, (">> %s: stopping the running commands, then the summary\n" % name).encode())
        with ctx.lock:
            procs = list(ctx.children.values())
            ctx.signalled.update(p.pid for p in procs if p.poll() is None)
        stop_groups(procs, STOP_GRACE_SECONDS)
        if first and not ctx.finishing and not ctx.in_step:
            raise Stopped(name)
    return handler


@contextlib.contextmanager
def judged_on_stop(ctx):
    """A block that runs commands as a step does: a signal meanwhile stops
    its commands and lets it end (what finished is judged; stop_handler
    raises nothing while it runs), and Stopped is raised after it."""
    held, ctx.in_step = ctx.in_step, True
    try:
        yield
    finally:
        ctx.in_step = held
    if ctx.stopping:
        raise Stopped(ctx.stopping)


def run_steps(s):
    """The table's steps in order, each announced (">> start"), its result
    printed and the summary rewritten; an exception is the step's FAIL."""
    ctx = s.ctx
    for step in s.steps:
        if not s.exists(step):
            s.end(step, None)
            continue
        # A signal while the step runs stops its commands and lets it end:
        # what finished is judged (a failure stays a failure), the rest of
        # it is CUT, and so are the steps after it.
        with judged_on_stop(ctx):
            try:
                r = run_step(ctx, step, on_start=lambda limit, step=step: s.begin(step, limit))
            except Exception as e:  # noqa: BLE001 - the step's failure, not the check's
                r = StepResult(step.name, "FAIL", raised(ctx, step, "step", e))
            s.end(step, r)


# --- the machine, the bundle and the build ---------------------------------------------


PROBE_SECONDS = 60  # each probe's limit (nvidia-smi, pip, ldd, --version, pipebench list)
TOOLS = ("mpirun", "nsys", "ncu", "compute-sanitizer", "cmake", "nvcc", "ninja", "python3")


def probe_run(s, name, argv, env=None, seconds=PROBE_SECONDS, text=True):
    """A probe's command with a time limit: its CompletedProcess, or None
    after a FAIL line named `name` saying why (no answer within `seconds`,
    or it could not start)."""
    try:
        return subprocess.run(argv, capture_output=True, env=env, timeout=seconds,
                              **({"encoding": "utf-8", "errors": "replace"} if text else {}))
    except subprocess.TimeoutExpired:
        s.note("FAIL", name, "%s: no answer in %.0f s (stopped)" % (shlex.join(argv)[:120], seconds))
    except OSError as e:
        s.note("FAIL", name, "%s: cannot start: %s" % (argv[0], e))
    return None


def gpu_holders(csv_text):
    """The processes `nvidia-smi --query-compute-apps=pid,process_name,
    used_memory --format=csv,noheader` lists, one "NAME (pid PID, MEMORY)"
    each: a check's commands that a kill left running on a warm machine,
    or another job's, which would share the GPU with this check's timings."""
    out = []
    for line in csv_text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 3 and cells[0].isdigit():
            out.append(f"{os.path.basename(cells[1])} (pid {cells[0]}, {cells[2]})")
    return out


def probe(s):
    """The machine: GPUs and Python wheels (the tools on PATH come after the
    build is found: probe_tools); CUDA's libraries put on LD_LIBRARY_PATH
    (the toolkit's, then the nvidia-* wheels')."""
    ctx, logs = s.ctx, s.ctx.work / "logs"
    gpu_line = "no nvidia-smi"
    if shutil.which("nvidia-smi"):
        smi = probe_run(s, "machine", ["nvidia-smi"])
        if smi is None:
            gpu_line = "nvidia-smi gave no answer"
        else:
            (logs / "nvidia-smi.txt").write_text(smi.stdout + smi.stderr)
            listing = probe_run(s, "machine", ["nvidia-smi", "-L"])
            if listing:
                ctx.gpus = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
            q = probe_run(s, "machine", ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                         "--format=csv,noheader"])
            gpu_line = ((q.stdout if q else "").splitlines() or ["?"])[0]
            apps = probe_run(s, "machine", ["nvidia-smi", "--query-compute-apps=pid,process_name,"
                                            "used_memory", "--format=csv,noheader"])
            held = gpu_holders(apps.stdout if apps else "")
            if held:
                s.note("INFO", "machine", "the GPU is already in use: %s (their work shares the"
                       " GPU with this check's timings)" % "; ".join(held[:4]),
                       values={"gpu_holders": held})
    pip = probe_run(s, "machine", [sys.executable, "-m", "pip", "list", "--format=json",
                                   "--disable-pip-version-check"])
    try:
        packages = json.loads(pip.stdout) if pip and pip.returncode == 0 else []
    except ValueError:
        packages = []  # no pip, or one that does not speak JSON: no wheels listed
    s.wheels = [f"{p['name']} {p['version']}" for p in packages
                if re.search(r"nccl|cupti|cudnn|mpi|nvtx|sanitizer", p["name"], re.I)]
    s.note("INFO", "machine", f"{ctx.gpus} GPU(s): {gpu_line}",
           values={"gpus": ctx.gpus, "gpu": gpu_line, "wheels": s.wheels})
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    cuda_home = Path(nvcc).resolve().parent.parent
    cuda_libs = [str(d) for d in (cuda_home / "lib64", cuda_home / "extras/CUPTI/lib64",
                                  cuda_home / "targets/x86_64-linux/lib") if d.is_dir()]
    bases = site.getsitepackages() + [site.getusersitepackages()]
    wheel_libs = sorted({d for b in bases for d in glob.glob(os.path.join(b, "nvidia", "*", "lib"))})
    prepend_path(ctx.env, "LD_LIBRARY_PATH", cuda_libs + wheel_libs)
    return cuda_libs, wheel_libs


def probe_tools(s):
    """Which tools the steps' commands find: on the PATH they run with (the
    bundle's env.sh in force, where there is a bundle)."""
    ctx = s.ctx
    path = ctx.env.get("PATH")
    tools = " ".join(t if shutil.which(t, path=path) else "!" + t for t in TOOLS)
    (ctx.work / "logs" / "probe.txt").write_text(
        f"tools (! = missing): {tools}\nPATH={path}\n" + "".join(w + "\n" for w in s.wheels))
    s.note("INFO", "tools", f"on the steps' PATH (! = missing): {tools}",
           values={"missing_tools": [t[1:] for t in tools.split() if t.startswith("!")]})


def prepend_path(env, name, dirs):
    rest = env.get(name, "")
    env[name] = ":".join(list(dirs) + ([rest] if rest else []))


def sourced(script, env):
    """The environment after `source script` in bash (PROBE_SECONDS at most)."""
    p = subprocess.run(["bash", "-c", 'source "$1" >/dev/null && env -0', "_", str(script)],
                       capture_output=True, env=env, check=True, timeout=PROBE_SECONDS)
    return dict(kv.split("=", 1) for kv in p.stdout.decode(errors="replace").split("\0") if "=" in kv)


def bundle_dir(env):
    return Path(env.get("PPB_GPU_BUNDLE_DIR") or "/tmp/pipebench-gpu").resolve()


def unpack_bundle(s, archive):
    """The bundle unpacked, its env.sh in force; its build tree, or None with
    a FAIL saying why it cannot run here."""
    ctx = s.ctx
    dest = bundle_dir(ctx.env)
    try:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(archive) as t:
            if hasattr(tarfile, "tar_filter"):
                t.extractall(dest, filter="tar")
            else:
                t.extractall(dest)
        ctx.env = sourced(dest / "env.sh", ctx.env)
    except Exception as e:  # noqa: BLE001 - a broken archive raises many kinds
        s.note("FAIL", "bundle", f"{archive.name} does not unpack and set up in {dest}: "
                                 f"{type(e).__name__}: " + (str(e).splitlines() or [""])[0][:200])
        return None
    meta = read_json(dest / "bundle.json") or {}
    rev = meta.get("revision", "?")
    build = dest / "build"
    pb = build / "bench" / "pipebench"
    version = probe_run(s, "bundle", [str(pb), "--version"], env=ctx.env)
    if version is None:
        return None
    if version.returncode != 0:
        compat = dict(ctx.env)
        prepend_path(compat, "LD_LIBRARY_PATH", [str(dest / "lib" / "compat")])
        again = probe_run(s, "bundle", [str(pb), "--version"], env=compat)
        if again is None:
            return None
        if again.returncode == 0:
            ctx.env, version = compat, again  # this machine's libstdc++ is older
    ldd = probe_run(s, "bundle", ["ldd", str(pb)], env=ctx.env)
    if ldd is None:
        return None
    (ctx.work / "logs" / "ldd-pipebench.txt").write_text(ldd.stdout + ldd.stderr)
    (ctx.work / "logs" / "version.txt").write_text(version.stdout + version.stderr)
    missing = [line.split()[0] for line in ldd.stdout.splitlines() if "not found" in line]
    if missing:
        s.note("FAIL", "bundle", f"{rev}: pipebench misses {' '.join(missing)}"
                                 " (see logs/ldd-pipebench.txt)")
        return None
    if version.returncode != 0:
        s.note("FAIL", "bundle", f"{rev}: pipebench does not start: "
                                 + (version.stdout + version.stderr).strip().split("\n")[0])
        return None
    ompi = probe_run(s, "bundle", ["mpirun", "--version"], env=ctx.env)
    if ompi is None:
        return None
    words = ((ompi.stdout or "").splitlines() or [""])[0].split()
    s.note("PASS", "bundle", f"{rev}, built {meta.get('built', '?')};"
                             f" Open MPI {words[-1] if words else '?'}")
    mpiexec = str(Path(ctx.env.get("OPAL_PREFIX", "")) / "bin" / "mpiexec")
    tests = read_json(build / "gpu-tests.json")
    if tests is None:
        ctx.tests_missing = "the bundle has no build/gpu-tests.json"
    else:
        ctx.tests = placed_tests(tests, {"build": str(build), "source": str(ROOT),
                                         "mpiexec": mpiexec})
    return build


def build_here(s, cuda_libs, wheel_libs):
    """A build here, when PPB_GPU_CHECK_BUILD_HERE=1 asks for one: with the
    bundle's dev/ prefix (Boost.JSON, CLI11, GoogleTest, OpenBLAS, Open
    MPI's wrappers) where there is one, else with what this machine has;
    NCCL from the toolkit or the wheel. Another configuration than the
    bundle's (no benches; cuDNN only where CMake finds it here)."""
    ctx = s.ctx
    cfg = ["-DCMAKE_BUILD_TYPE=Release", "-DPPB_WITH_CUDA=ON", "-DPPB_WITH_CUDAEMU=OFF",
           "-DCMAKE_CUDA_ARCHITECTURES=native", "-DPPB_BUILD_BENCH=OFF"]
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    headers = [Path(nvcc).resolve().parent.parent / "include" / "nccl.h"]
    headers += [Path(d).parent / "include" / "nccl.h" for d in wheel_libs]
    nccl_h = next((h for h in headers if h.is_file()), None)
    nccl_so = next((sorted(glob.glob(d + "/libnccl.so*"))[0] for d in cuda_libs + wheel_libs
                    if glob.glob(d + "/libnccl.so*")), None)
    if nccl_h and nccl_so:
        cfg += [f"-DPPB_NCCL_INCLUDE={nccl_h.parent}", f"-DPPB_NCCL_LIBRARY={nccl_so}"]
    bundle = ctx.env.get("PPB_BUNDLE")
    if bundle and (Path(bundle) / "dev").is_dir():
        dev = Path(bundle) / "dev" / "usr"
        prepend_path(ctx.env, "CPATH", [f"{dev}/include/x86_64-linux-gnu", f"{dev}/include"])
        prepend_path(ctx.env, "LD_LIBRARY_PATH", [f"{dev}/lib/x86_64-linux-gnu"])
        cfg += [f"-DCMAKE_PREFIX_PATH={dev};{dev}/share/cmake", "-DBLA_VENDOR=OpenBLAS",
                f"-DMPI_CXX_COMPILER={ctx.env.get('OPAL_PREFIX', '')}/bin/mpicxx"]
    log = ctx.work / "logs" / "build.txt"
    # As in a step: a signal stops the build and lets run_command return
    # (raised between the build's start and its registration, it would
    # leave the build running in its own session).
    with judged_on_stop(ctx):
        o = run_command(ctx, "build", ["bash", "-c", 'cmake -S . -B build/gpu-local -G Ninja "$@"'
                                       ' && cmake --build build/gpu-local -j "$(nproc)"', "_"] + cfg,
                        300, log)
    if o.rc == 0:
        s.note("PASS", "build", f"built here in build/gpu-local ({time.monotonic() - ctx.start:.0f} s)")
        return ROOT / "build" / "gpu-local"
    s.note("CUT" if o.cut else "FAIL", "build",
           "the build here (PPB_GPU_CHECK_BUILD_HERE=1) failed: " + build_error(log))
    return None


def parse_budget(env):
    try:
        budget = float(env.get("PPB_GPU_CHECK_SECONDS") or 450)
    except ValueError:
        budget = math.nan
    if not budget > 0:
        raise UsageError("PPB_GPU_CHECK_SECONDS: expected seconds, got '%s'"
                         % env["PPB_GPU_CHECK_SECONDS"])
    return budget


def settings():
    """The context from the environment (relative paths from the
    repository root); UsageError on a bad value."""
    env = os.environ
    out = (ROOT / (env.get("OUT") or "out/gpu-check")).resolve()
    work = (ROOT / (env.get("PPB_GPU_CHECK_WORK") or "out/gpu-check-work")).resolve()
    if work == out or out in work.parents or work in out.parents:
        raise UsageError(f"PPB_GPU_CHECK_WORK: {work} and OUT {out} must lie apart, neither in"
                         " the other (OUT holds only the summary and the archive)")
    ctx = Context(out=out, work=work, budget=parse_budget(env))
    ctx.backend = env.get("PPB_GPU_CHECK_BACKEND") or "cuda"
    ctx.model = env.get("PPB_GPU_CHECK_MODEL") or "gpt-tiny"
    ctx.bubble_model = env.get("PPB_GPU_CHECK_BUBBLE_MODEL") or "gpt-small"
    ctx.schedules = env.get("PPB_GPU_CHECK_SCHEDULES") or "all"
    ctx.selected = parse_selection(env.get("PPB_GPU_CHECK_STEPS"), STEPS)
    ctx.build_here = env.get("PPB_GPU_CHECK_BUILD_HERE") == "1"
    for name, attr in (("PPB_GPU_CHECK_BUILD", "build"), ("PPB_GPU_CHECK_EMULATED", "emulator")):
        if env.get(name):
            p = (ROOT / env[name]).resolve()
            if not p.is_dir():
                raise UsageError(f"{name}: no folder {env[name]}")
            setattr(ctx, attr, p)
    return ctx


def prepare_folders(ctx):
    """OUT made; the work folder emptied (an earlier check's, marked so) or
    made. UsageError when it holds files and no mark: it is not the
    check's to empty."""
    work = ctx.work
    if work.exists():
        if any(work.iterdir()) and not (work / WORK_MARK).exists():
            raise UsageError(f"PPB_GPU_CHECK_WORK: {work} holds files that are no earlier"
                             " check's (no " + WORK_MARK + "): name a new or empty folder")
        shutil.rmtree(work)
    (work / "logs").mkdir(parents=True)
    (work / WORK_MARK).write_text("ci/gpu_check.py's work folder: the next check empties it\n")
    ctx.out.mkdir(parents=True, exist_ok=True)


BUNDLE = ROOT / "gpu-bundle" / "pipebench-gpu.tar.xz"


def find_build(s, cuda_libs, wheel_libs):
    """The build tree to check: PPB_GPU_CHECK_BUILD's, the bundle's, or one
    built here where PPB_GPU_CHECK_BUILD_HERE=1 asks; the gpu-labelled
    tests of a build tree from its ctest. A bundle that fails is the
    check's end (FAIL bundle) unless a build here was asked for."""
    ctx = s.ctx
    if ctx.build:
        s.note("INFO", "build", f"the build tree PPB_GPU_CHECK_BUILD names: {ctx.build}")
    elif BUNDLE.is_file():
        s.phase("bundle")
        ctx.build = unpack_bundle(s, BUNDLE)
        if ctx.build:
            return
        if not ctx.build_here:
            s.note("INFO", "build", "nothing built here after the bundle failed"
                                    " (PPB_GPU_CHECK_BUILD_HERE=1 builds here, up to 300 s)")
            return
    elif not ctx.build_here:
        s.note("FAIL", "build", "no bundle (gpu-bundle/pipebench-gpu.tar.xz: make it with"
                                " ci/gpu-bundle and carry gpu-bundle/) and no PPB_GPU_CHECK_BUILD;"
                                " PPB_GPU_CHECK_BUILD_HERE=1 builds here (up to 300 s)")
        return
    if not ctx.build:
        s.phase("build")
        ctx.build = build_here(s, cuda_libs, wheel_libs)
    if ctx.build and ctx.tests is None:
        try:
            ctx.tests = placed_tests(capture_build_tests(ctx.build), ctest_places(ctx.build, ROOT))
        except (UsageError, OSError, ValueError) as e:
            ctx.tests_missing = f"no list of the gpu-labelled tests: {e}"


def unusable_device(ctx):
    """On a GPU run (the cuda backend, no emulator standing in): why the
    cuda backend cannot run here (`pipebench list`'s why_not), else None.
    Without it every device step would skip, and a check of the other
    steps could pass having done no GPU work."""
    if ctx.backend != "cuda" or ctx.emulator or ctx.available("backends", "cuda"):
        return None
    return ctx.why_not("backends", "cuda")


def set_up(s):
    """The machine probed, the build found, the tools on its PATH listed,
    the emulator and Open MPI's settings in place, `pipebench list --json`
    read: True when the steps can run."""
    ctx = s.ctx
    s.phase("probe")
    cuda_libs, wheel_libs = probe(s)
    find_build(s, cuda_libs, wheel_libs)
    probe_tools(s)
    if not ctx.build:
        return False
    if ctx.backend != "cuda":
        s.note("INFO", "rehearsal", f"the {ctx.backend} backend stands in for the GPU;"
                                    " device-only steps skip")
    if ctx.emulator:
        if not (ctx.emulator / "libcudart.so.13").is_file():
            s.note("FAIL", "emulator", f"no libcudart.so.13 in {ctx.emulator}")
            return False
        prepend_path(ctx.env, "LD_LIBRARY_PATH", [str(ctx.emulator)])
        ctx.env["OPENBLAS_NUM_THREADS"] = "1"
        s.note("INFO", "rehearsal", f"the CUDA emulator in {ctx.emulator} stands in for the GPU"
                                    f" (model {ctx.model}); steps needing NVIDIA's own libraries skip")
    ctx.env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    ctx.env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    s.phase("list")
    listing = probe_run(s, "list", [str(ctx.pb), "list", "--json"], env=ctx.env)
    if listing is None:
        return False
    (ctx.work / "logs" / "list.json").write_text(listing.stdout + listing.stderr)
    try:
        ctx.listing = json.loads(listing.stdout)
        if ctx.listing.get("schema") != LIST_SCHEMA:
            raise ValueError(f"schema {ctx.listing.get('schema')!r}, expected {LIST_SCHEMA}")
    except ValueError as e:
        s.note("FAIL", "list", f"pipebench list --json: {e} (logs/list.json)")
        return False
    if not ctx.listed("collectors", "cupti"):
        s.note("INFO", "sweep", "cupti collector not in this build: nvtx only")
    if not ctx.listed("backends", ctx.backend):
        raise UsageError("PPB_GPU_CHECK_BACKEND: no backend '%s' in this build (it has %s)" % (
            ctx.backend, ", ".join(e["name"] for e in ctx.listing.get("backends", []))))
    why = unusable_device(ctx)
    if why:
        s.note("FAIL", "list", f"the cuda backend cannot run here: {why} (every device step"
                               " would skip; logs/list.json)")
        return False
    s.phase(None)
    return True


def check(ctx, steps=STEPS, setup=set_up):
    """The whole check; the exit status. The summary and the archive are in
    OUT from the start, rewritten as the steps go; a SIGTERM or SIGINT stops
    the running commands and ends the check with its summary (stop_handler)."""
    prepare_folders(ctx)
    s = Session(ctx, steps)
    previous = {sig: signal.signal(sig, stop_handler(s)) for sig in STOP_SIGNALS}
    try:
        try:
            s.checkpoint(pack=False)
            if setup(s):
                s.checkpoint()
                run_steps(s)
        except Stopped as e:
            s.stopped(e.signame)
        except UsageError as e:
            s.note("FAIL", "settings", str(e))
            s.finish()
            raise
        except Exception as e:  # noqa: BLE001 - the summary still says what happened
            name = s.current["name"] if s.current else "setup"
            s.current = s.current_step = None
            s.note("FAIL", name, "raised %s: %s" % (
                type(e).__name__, (str(e).splitlines() or [""])[0][:200]))
            traceback.print_exc()
        while True:
            try:
                return s.finish()
            except Stopped as e:  # between the last step and finish()'s first line
                s.stopped(e.signame)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def step_listing(selected, budget):
    """`--list`: each step's name as PPB_GPU_CHECK_STEPS spells it, whether
    it runs by default and with `selected` (a parse_selection), its time
    limit (its commands' limits together), the running total of the
    selected steps' limits and whether that total stays within `budget`
    (PPB_GPU_CHECK_SECONDS), its commands and where it exists only under a
    condition."""
    lines = ["%-14s %-7s %-8s %6s %7s %-6s  %s" % (
        "step", "default", "selected", "limit", "total", "budget", "commands")]
    variables = Context(out=Path("OUT"), work=Path("WORK"), budget=0).vars()  # for the tags
    total = 0
    for step in STEPS:
        limit = step_limit(step)
        chosen = step.name in selected if selected is not None else step.default
        if chosen:
            total += limit
        what = ("the gpu-labelled tests" if step.execute == "tests"
                else " ".join(expand(r.tag, step_vars(variables, step, r)) for r in step.runs))
        lines.append("%-14s %-7s %-8s %4d s %7s %-6s  %s%s" % (
            step_key(step.name), "yes" if step.default else "no", "yes" if chosen else "no", limit,
            "%5d s" % total if chosen else "-",
            ("fits" if total <= budget else "CUT") if chosen else "-",
            what, " (only where %s)" % step.only if step.only else ""))
    lines.append("total: the selected steps' limits summed in the order they run; budget: CUT"
                 " where that passes PPB_GPU_CHECK_SECONDS=%g (such a step is cut if those"
                 " before it take their whole limits; the setup before the first step counts"
                 " too)" % budget)
    lines.append("PPB_GPU_CHECK_STEPS=name,name,... runs those steps only (any case; spaces,"
                 " dashes or underscores alike); PPB_GPU_CHECK_SECONDS caps the whole run")
    return "\n".join(lines) + "\n"


def dry_run(ctx):
    """`--dry-run`: each step that would run, in order, with its limit, the
    running total and its commands as they would run, without running
    anything. Without a build's `pipebench list`, skips are not decided
    and --profile reads nvtx (the check adds cupti where the build has it)."""
    ctx.dry = True
    if ctx.build is None:
        ctx.build = bundle_dir(ctx.env) / "build"  # where the bundle unpacks
    variables = ctx.vars()
    lines = ["# gpu-check --dry-run: OUT=%s, work folder %s, budget %g s; skips are decided"
             " on the machine" % (ctx.out, ctx.work, ctx.budget)]
    total = 0
    for step in STEPS:
        if not ctx.selects(step):
            continue
        limit = step_limit(step)
        total += limit
        lines.append("# %s: limit %d s, %d s in all%s%s" % (
            step.name, limit, total, "; past the budget" if total > ctx.budget else "",
            " (only where %s)" % step.only if step.only else ""))
        if step.execute == "tests":
            lines.append("#   the gpu-labelled tests, %d at a time, longest TIMEOUT first; those"
                         " named Plant or gemm_bench and RUN_SERIAL ones alone after them"
                         % step.args["jobs"])
        for r in step.runs:
            rv = step_vars(variables, step, r)
            cmd = shlex.join(expand_argv(r.argv, rv))
            if r.stdout:
                cmd += " > " + shlex.quote(str(ctx.work / expand(r.stdout, rv)))
            lines.append(cmd + ("   # in the environment the check started with"
                                if r.outside else ""))
    return "\n".join(lines) + "\n"


def main(argv):
    try:
        if argv[1:2] == ["--list"]:
            sys.stdout.write(step_listing(parse_selection(os.environ.get("PPB_GPU_CHECK_STEPS"),
                                                          STEPS), parse_budget(os.environ)))
            return 0
        if argv[1:2] == ["--dry-run"]:
            sys.stdout.write(dry_run(settings()))
            return 0
        if argv[1:2] == ["--capture-tests"]:
            if len(argv) != 4:
                raise UsageError("usage: gpu_check.py --capture-tests BUILD_DIR FILE")
            write_json(Path(argv[3]), capture_build_tests(Path(argv[2]).resolve()))
            return 0
        if len(argv) > 1:
            raise UsageError(f"unknown argument '{argv[1]}' (settings are environment"
                             " variables: see ci/gpu_check.py's header)")
        return check(settings())
    except UsageError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
