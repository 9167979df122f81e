#!/usr/bin/env python3
"""ci/gpu_check.py's own logic, without running a check: its step table is
whole (every judge, executor, condition and template variable exists), the
budget cuts and never passes a step, the summary's result and exit status,
ctest's test properties captured and placed again, the pass rules on real
H200 result files (reports/tests/data/h200), the fast paths' summary also
on the CUDA emulator's (bench/tests/data/emulated-P2), and on pipebench.gemm/1,
p2p-device/1, torch-peer/1 and plan --validate documents; ci/torch_peer.py's
reading of a profiled step and its CUDA-graph path on stand-ins for
PyTorch's events, exceptions and CUDA calls; the steps
PPB_GPU_CHECK_STEPS selects, --list, and the nights step's rule on
synthetic reports (JUnit), plan --validate, health and gemm documents;
the run itself on short fake steps: the order of the steps and of the gpu
tests, a test the step's time stops or never starts being CUT, a raising
judge or runner failing its step alone, the summary rewritten as steps
start and end, OUT's three files and the archive without traces, a
SIGTERM stopping the running command and leaving the summary, probes
without an answer, the bundle's failure not followed by a build, and
--dry-run.

usage: python3 -m unittest gpu_check_test   (from bench/tests), or run it.
"""
import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import signal
import string
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from types import SimpleNamespace
from unittest import mock
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
import gpu_check as gc  # noqa: E402
import torch_peer as tp  # noqa: E402


def context(tmp, budget=1000.0, **kw):
    """A context whose work folder is tmp and whose OUT is tmp/OUT (which the
    archive leaves out)."""
    (Path(tmp) / "OUT").mkdir(exist_ok=True)
    kw.setdefault("build", Path("/b"))
    ctx = gc.Context(out=Path(tmp) / "OUT", work=Path(tmp), budget=budget, **kw)
    ctx.listing = {"schema": gc.LIST_SCHEMA,
                   "backends": [{"name": "cuda", "available": False, "why_not": "no driver"}],
                   "transports": [], "collectors": [{"name": "cupti", "available": True}]}
    return ctx


class GpuHolders(unittest.TestCase):
    def test_the_processes_nvidia_smi_lists_on_the_gpu_are_named(self):
        text = ("4242, /tmp/work/build/bench/pipebench, 1830 MiB\n"
                "4243, python3, 612 MiB\n")
        self.assertEqual(gc.gpu_holders(text), ["pipebench (pid 4242, 1830 MiB)",
                                                "python3 (pid 4243, 612 MiB)"])
        # None running, or a driver that does not answer the query.
        self.assertEqual(gc.gpu_holders(""), [])
        self.assertEqual(gc.gpu_holders("No running processes found"), [])
        self.assertEqual(gc.gpu_holders("[Not Supported]"), [])


class DeviceUsable(unittest.TestCase):
    def test_a_gpu_run_whose_cuda_backend_cannot_run_is_refused_with_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = context(tmp)  # cuda listed, not available: "no driver"
            self.assertEqual(gc.unusable_device(ctx), "no driver")
            ctx.listing["backends"][0] = {"name": "cuda", "available": True}
            self.assertIsNone(gc.unusable_device(ctx))
            # A rehearsal (another backend, or the emulator) skips the device steps.
            self.assertIsNone(gc.unusable_device(context(tmp, backend="cpu")))
            self.assertIsNone(gc.unusable_device(context(tmp, emulator=Path(tmp))))


def placeholders(template):
    return {f for _, f, _, _ in string.Formatter().parse(str(template)) if f}


class StepTable(unittest.TestCase):
    def test_every_name_the_table_uses_exists(self):
        seen = set()
        for step in gc.STEPS:
            self.assertIn(step.judge, gc.JUDGES, step.name)
            self.assertIn(step.execute, gc.EXECUTORS, step.name)
            for cond, reason in step.skip:
                self.assertIn(cond, gc.CONDITIONS, step.name)
                self.assertTrue(reason, step.name)
            if step.only:
                self.assertIn(step.only, gc.CONDITIONS, step.name)
            self.assertNotIn((step.name, step.only), seen, "two steps of one name exist together")
            seen.add((step.name, step.only))
            self.assertTrue(step.runs or step.execute != "commands", step.name)

    def test_every_template_expands_in_a_context(self):
        with tempfile.TemporaryDirectory() as tmp:
            base = context(tmp).vars()
        for step in gc.STEPS:
            v = gc.step_vars(base, step)
            texts = [step.what, *step.reads, *(r for _, r in step.skip)]
            for run in step.runs:
                rv = gc.step_vars(base, step, run)
                argv = gc.expand_argv(run.argv, rv)
                self.assertFalse([a for a in argv if "{" in a], (step.name, argv))
                for t in (run.tag, run.fresh, run.stdout):
                    self.assertNotIn("{", gc.expand(t, rv), step.name)
            for t in texts:
                self.assertTrue(placeholders(t) <= set(v), (step.name, t))
                gc.expand(t, v)

    def test_a_list_variable_becomes_arguments(self):
        self.assertEqual(gc.expand_argv(["x", "{d}", "--n", "{n}"], {"d": ["a", "b"], "n": 2}),
                         ["x", "a", "b", "--n", "2"])

    def test_the_first_skip_that_holds_gives_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = context(tmp, backend="cpu")
            gemm = next(s for s in gc.STEPS if s.name == "gemm")
            self.assertEqual(gc.run_step(ctx, gemm).figures, "the rehearsal has no GPU for cuBLAS")
            ctx.backend = "cuda"
            peer = next(s for s in gc.STEPS if s.name == "peer")
            r = gc.run_step(ctx, peer)
            self.assertEqual((r.status, r.figures), ("SKIP", "no usable GPU: no driver"))


class QuickStops(unittest.TestCase):
    """Commands stopped within a second, in a scratch folder of the test's own."""

    def setUp(self):
        self.saved = gc.MIN_START_SECONDS, gc.KILL_AFTER_SECONDS
        gc.MIN_START_SECONDS, gc.KILL_AFTER_SECONDS = 0.2, 1
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        gc.MIN_START_SECONDS, gc.KILL_AFTER_SECONDS = self.saved
        shutil.rmtree(self.tmp)


class Budget(QuickStops):
    def step(self, limit):
        return gc.Step("slow", "p2p", runs=(gc.Run("slow", ("sleep", "5"), limit=limit),),
                       reads=("none.json",))

    def test_a_step_the_budget_stops_is_cut(self):
        ctx = context(self.tmp, budget=0.6)
        t0 = time.monotonic()
        r = gc.run_step(ctx, self.step(60))
        self.assertLess(time.monotonic() - t0, 4)
        self.assertEqual(r.status, "CUT")
        self.assertIn("stopped by the time budget", r.figures)

    def test_a_step_with_no_budget_left_is_cut_not_started(self):
        ctx = context(self.tmp, budget=0.1)
        r = gc.run_step(ctx, self.step(60))
        self.assertEqual((r.status, r.figures), ("CUT", "slow: not started: the time budget was spent"))

    def test_a_step_past_its_own_limit_fails(self):
        ctx = context(self.tmp, budget=100)
        r = gc.run_step(ctx, self.step(0.5))
        self.assertEqual((r.status, r.figures), ("FAIL", "slow: timed out after 0 s"))

    def test_a_command_that_exits_non_zero_fails_before_the_judge(self):
        ctx = context(self.tmp)
        step = gc.Step("x", "p2p", runs=(gc.Run("x", ("sh", "-c", "echo an error here; exit 3"),
                                                 limit=10),), reads=("none.json",))
        r = gc.run_step(ctx, step)
        self.assertEqual((r.status, r.figures), ("FAIL", "x: exit 3 (an error here)"))
        self.assertEqual(r.logs, ["logs/x.txt"])

    def test_a_failure_before_a_cut_fails_the_step(self):
        # A cut never hides a failure: the first command failed, the budget
        # then stopped the second (the sanitizer's memcheck, then racecheck).
        step = gc.Step("x", "p2p", runs=(gc.Run("bad", ("sh", "-c", "echo an error here; exit 3"), limit=10),
                                         gc.Run("slow", ("sleep", "5"), limit=60)),
                       reads=("none.json",))
        for judge_failures in (False, True):
            with self.subTest(judge_failures=judge_failures):
                ctx = context(self.tmp, budget=1.5)
                r = gc.run_step(ctx, dataclasses.replace(step, judge_failures=judge_failures))
                self.assertEqual(r.status, "FAIL")
                self.assertTrue(r.figures.startswith("bad: exit 3 (an error here); then slow: "),
                                r.figures)

    def test_an_outside_command_runs_in_the_environment_the_check_started_with(self):
        ctx = context(self.tmp)
        ctx.start_env = dict(ctx.env, PPB_WHERE="start")
        ctx.env["PPB_WHERE"] = "set up"
        echo = ("sh", "-c", "echo $PPB_WHERE")
        step = gc.Step("x", "p2p", runs=(gc.Run("a", echo, limit=10, stdout="a.txt"),
                                         gc.Run("b", echo, limit=10, stdout="sub/b.txt",
                                                outside=True)))
        gc.run_commands(ctx, step, ctx.vars())
        self.assertEqual((Path(self.tmp) / "a.txt").read_text(), "set up\n")
        self.assertEqual((Path(self.tmp) / "sub" / "b.txt").read_text(), "start\n")


class Summary(unittest.TestCase):
    def finish(self, statuses, values=None):
        with tempfile.TemporaryDirectory() as tmp:
            s = gc.Session(context(tmp))
            for i, st in enumerate(statuses):
                with contextlib.redirect_stdout(io.StringIO()):
                    s.note(st, "step %d" % i, "figures %d" % i, values=(values or {}).get(i, {}))
            with contextlib.redirect_stdout(io.StringIO()):
                code = s.finish()
            text = (Path(tmp) / "OUT" / "gpu-check.txt").read_text()
            doc = json.loads((Path(tmp) / "OUT" / "gpu-check.json").read_text())
        return code, text, doc

    def test_skips_pass_and_a_cut_or_a_failure_does_not(self):
        code, text, doc = self.finish(["INFO", "PASS", "SKIP"])
        self.assertEqual((code, doc["result"]), (0, "passed"))
        self.assertEqual(text.splitlines()[-1], "RESULT: passed (skips say why)")
        code, text, doc = self.finish(["PASS", "CUT", "SKIP"])
        self.assertEqual((code, doc["result"]), (1, "cut"))
        self.assertTrue(text.splitlines()[-1].startswith("RESULT: INCOMPLETE"))
        code, _, doc = self.finish(["CUT", "FAIL"])
        self.assertEqual((code, doc["result"]), (1, "failed"))

    def test_a_criterion_not_measured_is_named_beside_passed(self):
        code, text, doc = self.finish(["PASS", "SKIP"], values={1: {"unmeasured": ["gpt-tiny"]}})
        self.assertEqual((code, doc["result"], doc["not_measured"]),
                         (0, "passed", ["step 1: gpt-tiny"]))
        self.assertEqual(text.splitlines()[-1],
                         "RESULT: passed (skips say why); not measured: step 1: gpt-tiny")

    def test_text_and_json_hold_the_same_lines(self):
        _, text, doc = self.finish(["PASS", "FAIL"])
        self.assertEqual(doc["schema"], gc.SUMMARY_SCHEMA)
        self.assertEqual(text.splitlines()[1:3], ["PASS  step 0      figures 0",
                                                  "FAIL  step 1      figures 1"])
        self.assertEqual([(s["status"], s["name"]) for s in doc["steps"]],
                         [("PASS", "step 0"), ("FAIL", "step 1")])


class Settings(unittest.TestCase):
    def test_a_bad_setting_is_one_line_naming_it(self):
        saved = dict(gc.os.environ)
        try:
            gc.os.environ["PPB_GPU_CHECK_SECONDS"] = "soon"
            with self.assertRaisesRegex(gc.UsageError,
                                        "^PPB_GPU_CHECK_SECONDS: expected seconds, got 'soon'$"):
                gc.settings()
            gc.os.environ["PPB_GPU_CHECK_SECONDS"] = "60"
            gc.os.environ["PPB_GPU_CHECK_BUILD"] = "no/such/folder"
            with self.assertRaisesRegex(gc.UsageError, "^PPB_GPU_CHECK_BUILD: no folder no/such/folder$"):
                gc.settings()
        finally:
            gc.os.environ.clear()
            gc.os.environ.update(saved)
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(gc.main(["gpu_check.py", "--fast"]), 2)
        self.assertEqual(len(err.getvalue().splitlines()), 1)


def broken_bundle(tmp, **kw):
    """A context in tmp (context(tmp, **kw)) whose bundle folder is
    tmp/unpacked, and a bundle archive in tmp that does not unpack."""
    (Path(tmp) / "logs").mkdir()
    archive = Path(tmp) / "pipebench-gpu.tar.xz"
    archive.write_bytes(b"not an archive")
    ctx = context(tmp, **kw)
    ctx.env["PPB_GPU_BUNDLE_DIR"] = str(Path(tmp) / "unpacked")
    return ctx, archive


class Bundle(unittest.TestCase):
    def test_an_archive_that_does_not_unpack_fails_the_bundle_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx, archive = broken_bundle(tmp)
            s = gc.Session(ctx)
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertIsNone(gc.unpack_bundle(s, archive))
            self.assertEqual(s.results[0].status, "FAIL")
            self.assertIn("pipebench-gpu.tar.xz does not unpack", s.results[0].figures)


    def test_a_failed_build_names_cmakes_error_not_a_probe_that_found_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "build.txt"
            probes = "-- Looking for sgemm_\n-- Looking for sgemm_ - not found\n"
            log.write_text(probes + "-- Configuring done\nCMake Error in pipeline/exec/CMakeLists.txt:\n"
                           "  CUDA_ARCHITECTURES is set to \"native\", but no GPU was detected.\n\n"
                           "CMake Generate step failed.\n")
            self.assertEqual(gc.build_error(log),
                             "CMake Error in pipeline/exec/CMakeLists.txt: CUDA_ARCHITECTURES is set "
                             "to \"native\", but no GPU was detected.")
            log.write_text(probes + "[3/9] Building CUDA object k.cu.o\n"
                           "k.cu(4): error: identifier \"x\" is undefined\nninja: build stopped\n")
            self.assertEqual(gc.build_error(log), 'k.cu(4): error: identifier "x" is undefined')
            log.write_text(probes + "Killed\n\n")
            self.assertEqual(gc.build_error(log), "Killed")


class GpuTests(unittest.TestCase):
    PLACES = {"build": "/src/build/gpu", "source": "/src", "mpiexec": "/usr/bin/mpiexec"}

    def ctest(self, **props):
        p = [{"name": "LABELS", "value": ["gpu"]},
             {"name": "WORKING_DIRECTORY", "value": "/src/build/gpu/bench"}]
        p += [{"name": k, "value": v} for k, v in props.items()]
        return {"tests": [{"name": "t", "properties": p, "command": [
            "/src/bench/tests/x.sh", "/usr/bin/mpiexec", "-n", "2", "/src/build/gpu/bench/pipebench",
            "--out=/src/build/gpu/o"]},
            {"name": "not gpu", "properties": [{"name": "LABELS", "value": ["unit"]}],
             "command": ["/bin/true"]}]}

    def test_captured_paths_are_placeholders_placed_again_elsewhere(self):
        doc = gc.capture_tests(self.ctest(ENVIRONMENT=["A=/src/build/gpu/lib"]), self.PLACES)
        self.assertEqual([t["name"] for t in doc["tests"]], ["t"])
        t = doc["tests"][0]
        self.assertEqual(t["command"], ["{source}/bench/tests/x.sh", "{mpiexec}", "-n", "2",
                                        "{build}/bench/pipebench", "--out={build}/o"])
        self.assertEqual((t["cwd"], t["env"]), ("{build}/bench", {"A": "{build}/lib"}))
        there = gc.placed_tests(json.loads(json.dumps(doc)), {
            "build": "/tmp/b/build", "source": "/repo", "mpiexec": "/tmp/b/ompi/bin/mpiexec"})[0]
        self.assertEqual(there["command"][:2], ["/repo/bench/tests/x.sh", "/tmp/b/ompi/bin/mpiexec"])
        self.assertEqual(there["command"][-1], "--out=/tmp/b/build/o")

    def test_a_property_the_runner_does_not_honour_is_refused(self):
        with self.assertRaisesRegex(gc.UsageError, "^test t: property DEPENDS is not run by"):
            gc.capture_tests(self.ctest(DEPENDS=["u"]), self.PLACES)

    def test_a_test_passes_skips_and_fails_as_ctest_decides(self):
        t = gc.capture_tests(self.ctest(SKIP_RETURN_CODE=77), self.PLACES)["tests"][0]
        self.assertEqual(gc.test_verdict(t, 77, "", False), "skipped")
        self.assertEqual(gc.test_verdict(t, 0, "", False), "passed")
        self.assertEqual(gc.test_verdict(t, 0, "", True), "failed")
        self.assertEqual(gc.test_verdict(t, 1, "", False), "failed")
        t = gc.capture_tests(self.ctest(SKIP_REGULAR_EXPRESSION=[r"\[  SKIPPED \]"],
                                        PASS_REGULAR_EXPRESSION=["ok [0-9]+"],
                                        WILL_FAIL=True), self.PLACES)["tests"][0]
        self.assertEqual(gc.test_verdict(t, 0, "[  SKIPPED ] x", False), "skipped")
        self.assertEqual(gc.test_verdict(t, 1, "ok 3", False), "failed")  # WILL_FAIL inverts
        self.assertEqual(gc.test_verdict(t, 0, "nothing", False), "passed")


class PassRules(unittest.TestCase):
    H200 = ROOT / "reports" / "tests" / "data" / "h200"

    def folder(self, tmp, prefix):
        for f in self.H200.glob(prefix + "_*.json"):
            shutil.copy(f, Path(tmp) / f.name[len(prefix) + 1:])
        return gc.read_results(tmp)

    def test_h200_sweep_passes_and_its_bubbles_differ_by_design(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertEqual((v.values["ok"], v.values["checks_passed"], v.values["checks"]), (3, 3, 3))
        self.assertEqual(v.values["device"], "NVIDIA H200")
        # gpt-tiny is launch-bound: held to the bubble rule it fails.
        strict = gc.summarise_results(rows, 0.02)
        self.assertEqual(strict.status, "FAIL")
        self.assertEqual(strict.values["device_bubble"]["within"], 0)

    def test_checks_over_two_steps_are_counted_and_a_null_error_is_the_worst(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        # Recorded before check.steps: no step count on the line.
        v = gc.summarise_results(rows)
        self.assertEqual(v.values["checks_two_steps"], 0)
        self.assertIn("; check 3/3 passed (max rel err", v.figures)
        rows[0]["metrics"]["check"]["steps"] = 2
        v = gc.summarise_results(rows)
        self.assertIn("; check 3/3 passed, 1 over 2 steps (max rel err", v.figures)
        for r in rows:
            r["metrics"]["check"]["steps"] = 2
        v = gc.summarise_results(rows)
        self.assertEqual(v.values["checks_two_steps"], 3)
        self.assertIn("; check 3/3 passed over 2 steps (max rel err", v.figures)
        # A NaN gradient: max_rel_error null, the check failed.
        rows[1]["metrics"]["check"].update(max_rel_error=None, passed=False)
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "FAIL", v.figures)
        self.assertIn("(max rel err inf) FAILED ", v.figures)
        self.assertIsNone(v.values["max_rel_error"])

    def test_h200_bubble_step_agrees_within_its_tolerance(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "bubble-P2")
        v = gc.summarise_results(rows, 0.02)
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertEqual((v.values["device_bubble"]["within"], v.values["device_bubble"]["of"]), (2, 2))
        self.assertLess(v.values["device_bubble"]["max_abs_diff"], 0.02)

    def test_the_largest_kernel_families_share_the_device_time(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        # Recorded before the families: no kernels part.
        v = gc.summarise_results(rows)
        self.assertNotIn("; kernels ", v.figures)
        self.assertNotIn("kernel_families", v.values)
        seconds = {"gemm": [0.2, 0.1], "attention": [0.3, 0.2], "layernorm": [0.05, 0.05],
                   "gelu": [0.0, 0.0], "other": [0.05, 0.05]}
        for r in rows[:2]:  # summed over results and stages
            r["metrics"].setdefault("collectors", {}).setdefault("cupti", {})["step"] = {
                "kernel_seconds_" + f: list(t) for f, t in seconds.items()}
        v = gc.summarise_results(rows)
        self.assertIn("; kernels attention 50%, gemm 30%, layernorm 10%, other 10%; ", v.figures)
        self.assertEqual(v.values["kernel_families"][0], ("attention", 0.5))

    def test_the_attention_that_ran_is_named_with_why_it_was_naive(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        # Recorded before the field: naive, with no reason.
        self.assertEqual(gc.summarise_results(rows).values["attention"],
                         [{"form": "naive", "reason": ""}])
        rows[0]["config"]["attention"] = "fused"
        for r in rows[1:]:
            r["config"].update(attention="naive", attention_reason="fp32: no fused kernel")
        v = gc.summarise_results(rows)
        self.assertIn("; attention fused, naive (fp32: no fused kernel)", v.figures)

    def test_fast_paths_recorded_before_their_fields_are_not_recorded_and_pass(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertIn("; GEMM epilogues not recorded; CUDA graphs not recorded;"
                      " optimizer update not recorded;", v.figures)
        for k in ("gemm_epilogues", "cuda_graphs", "update_rel_error"):
            self.assertIsNone(v.values[k], k)

    def test_the_fast_paths_that_ran_are_summed_over_the_results(self):
        # Two real results of the cuda backend on the emulator: 192 fused
        # GEMMs each, each chunk's optimizer step captured once and replayed
        # (2 ranks x 3 steps), the actions eager, the update exact.
        rows = gc.read_results(ROOT / "bench" / "tests" / "data" / "emulated-P2")
        self.assertEqual(len(rows), 2)
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "PASS", v.figures)
        eager = "actions allocate their kept activations per call (not static per micro-batch slot)"
        self.assertIn("; attention naive (fp32: cuDNN has no fused flash attention for fp32)"
                      "; GEMM epilogues 384 fused, 0 refused"
                      "; CUDA graphs 4 captured, 8 replayed, 0 rebuilt, 120 eager (%s)"
                      "; optimizer update max rel err 0.0e+00 (1f1b x layer);" % eager, v.figures)
        self.assertEqual(v.values["cuda_graphs"]["eager_reasons"], [eager])
        # A refusal, a worse update and a result without graphs are figures,
        # never a failure.
        rows[1]["metrics"]["gemm_epilogues"].update(
            refusals=2, first_refusal="rank 1: bias GEMM 2 x 3 x 4 bf16: no algorithm")
        rows[1]["metrics"]["check"]["update_rel_error"] = 3e-7
        del rows[0]["metrics"]["cuda_graphs"]
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertIn("; GEMM epilogues 384 fused, 2 refused (first in zb-h1 x layer: rank 1: bias"
                      " GEMM 2 x 3 x 4 bf16: no algorithm); CUDA graphs 2 captured, 4 replayed,"
                      " 0 rebuilt, 72 eager (%s) (in 1 of 2 results); optimizer update max rel err"
                      " 3.0e-07 (zb-h1 x layer);" % eager, v.figures)

    def test_a_failed_check_or_no_result_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = self.folder(tmp, "sweep-P2")
        rows[0]["metrics"]["check"]["passed"] = False
        v = gc.summarise_results(rows)
        self.assertEqual(v.status, "FAIL")
        self.assertIn("FAILED " + gc.combination(rows[0]), v.figures)
        self.assertEqual(gc.summarise_results([]).status, "FAIL")

    def write(self, tmp, name, doc):
        p = Path(tmp) / name
        p.write_text(json.dumps(doc))
        return p

    def test_gemm_reads_the_benchmarks_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            reads = [self.write(tmp, "gemm-%s.json" % d, {
                "schema": "pipebench.gemm/1", "dtype": d, "device": "H200",
                "backend_tflops": b, "cublas_tflops": c, "ratio": b / c})
                for d, b, c in (("bf16", 149.2, 153.7), ("fp32", 48.1, 48.9))]
            v = gc.judge_gemm(None, None, reads, [])
            self.assertEqual(v.figures, "bf16: backend 149.20 TFLOP/s, cuBLAS alone 153.70 TFLOP/s,"
                             " 0.971; fp32: backend 48.10 TFLOP/s, cuBLAS alone 48.90 TFLOP/s, 0.984")
            reads[1].write_text("{}")
            self.assertEqual(gc.judge_gemm(None, None, reads, []).status, "FAIL")

    def test_unit_bench_sums_a_layer_per_pass(self):
        def row(name, t, unit="us", error=""):
            r = {"name": name + "/manual_time", "run_name": name + "/manual_time",
                 "real_time": t, "time_unit": unit}
            return dict(r, error_occurred=True, error_message=error) if error else r
        with tempfile.TemporaryDirectory() as tmp:
            reads = [self.write(tmp, "unit-bench-%s.json" % d, {"benchmarks": [
                row(d + "/qkv/F", 10.0), row(d + "/fc2/F", 0.005, "ms"), row(d + "/fc2/W", 7.0),
                row(d + "/head/F", 100.0), row(d + "/ln1/I", 2000.0, "ns")]})
                for d in ("bf16", "fp32")]
            v = gc.judge_unit_bench(None, None, reads, [])
            self.assertEqual(v.status, "PASS")
            self.assertEqual(v.figures, "bf16: 5 rows, a layer F 15.0 us, I 2.0 us, W 7.0 us; "
                             "fp32: 5 rows, a layer F 15.0 us, I 2.0 us, W 7.0 us")
            # Beside a fused attention, the naive one's F and I; not in the layer's sums.
            reads[1].write_text(json.dumps({"benchmarks": [
                row("fp32/attention/F", 30.0), row("fp32/attention/I", 70.0),
                row("fp32/attention_naive/F", 90.0), row("fp32/attention_naive/I", 0.2, "ms")]}))
            self.assertEqual(gc.judge_unit_bench(None, None, reads, []).figures.split("; fp32: ")[1],
                             "4 rows, a layer F 30.0 us, I 70.0 us, W 0.0 us; attention F 30.0"
                             " (naive 90.0) us, I 70.0 (naive 200.0) us")
            reads[1].write_text(json.dumps({"benchmarks": [row("fp32/qkv/F", 0, error="oom")]}))
            self.assertEqual(gc.judge_unit_bench(None, None, reads, []).figures,
                             "unit-bench-fp32.json: fp32/qkv/F/manual_time: oom")
            reads[1].write_text("{}")
            self.assertEqual(gc.judge_unit_bench(None, None, reads, []).status, "FAIL")

    def p2p(self, algbw, wrong=0):
        return {"schema": "pipebench.p2p-device/1", "wrong": wrong, "transports": [
            {"transport": "mpi", "path": "staged", "baseline": "raw MPI (staged)", "skipped": "",
             "results": [{"bytes": 67108864, "algbw_GBps": algbw, "baseline_algbw_GBps": 2.5}]},
            {"transport": "nccl", "path": "", "baseline": "", "skipped": "one GPU", "results": []}]}

    def test_peer_compares_the_wait_strategies_and_counts_wrong_bytes(self):
        with tempfile.TemporaryDirectory() as tmp:
            reads = [self.write(tmp, "a.json", self.p2p(2.0)), self.write(tmp, "b.json", self.p2p(1.0))]
            v = gc.judge_peer(None, None, reads, [])
            self.assertEqual((v.status, v.figures), ("PASS", "mpi 2.0 vs 1.0 GB/s (0.50); 0 wrong"))
            reads[1] = self.write(tmp, "b.json", self.p2p(1.0, wrong=4))
            self.assertEqual(gc.judge_peer(None, None, reads, []).status, "FAIL")
            self.assertEqual(gc.judge_p2p(None, None, reads[:1], []).figures,
                             "67108864 B: mpi staged 2.0 GB/s vs raw MPI (staged) 2.5;"
                             " nccl skipped (one GPU); 0 wrong")

    def test_sanitizer_passes_only_when_every_tool_is_clean(self):
        step = next(s for s in gc.STEPS if s.name == "sanitizer")
        self.assertEqual([r.tag for r in step.runs],
                         ["sanitizer-memcheck", "sanitizer-racecheck", "sanitizer-synccheck"])
        with tempfile.TemporaryDirectory() as tmp:
            clean, race = Path(tmp) / "clean.txt", Path(tmp) / "race.txt"
            clean.write_text("========= ERROR SUMMARY: 0 errors\n")
            race.write_text("========= Error: Race reported between Write access at"
                            " ppb_column_partials\n========= RACECHECK SUMMARY: 1 hazard\n")
            outcomes = [gc.Outcome(r.tag, clean, rc=0) for r in step.runs]
            v = gc.judge_sanitizer(None, step, [], outcomes)
            self.assertEqual(v.status, "PASS")
            self.assertEqual(v.values["clean"], ["memcheck", "racecheck", "synccheck"])
            outcomes[1] = gc.Outcome(step.runs[1].tag, race, rc=9)
            v = gc.judge_sanitizer(None, step, [], outcomes)
            self.assertEqual(v.status, "FAIL")
            self.assertIn("racecheck: exit 9", v.figures)
            self.assertIn("ppb_column_partials", v.figures)
            # A later tool that cannot attach does not hide racecheck's hazard;
            # alone it is a skip saying so.
            detached = Path(tmp) / "detached.txt"
            detached.write_text("========= Error: Target application device not supported\n")
            outcomes[2] = gc.Outcome(step.runs[2].tag, detached, rc=1)
            v = gc.judge_sanitizer(None, step, [], outcomes)
            self.assertEqual((v.status, v.values["not_attached"]), ("FAIL", ["synccheck"]))
            self.assertIn("racecheck: exit 9", v.figures)
            self.assertIn("synccheck cannot attach here", v.figures)
            outcomes[1] = gc.Outcome(step.runs[1].tag, clean, rc=0)
            v = gc.judge_sanitizer(None, step, [], outcomes)
            self.assertEqual(v.status, "SKIP")
            self.assertIn("cannot attach here: synccheck: ", v.figures)

    def test_memory_holds_the_model_to_the_mean_and_to_each(self):
        step = next(s for s in gc.STEPS if s.name == "memory")
        row = {"source": "x", "error": {"peak_memory_bytes": 0.03, "samples_per_second": 0.1},
               "predicted": {"peak_memory_bytes": 103}, "measured": {"peak_memory_bytes": 100}}
        with tempfile.TemporaryDirectory() as tmp:
            doc = {"combinations": [row], "mean_abs_error": {"peak_memory_bytes": 0.03,
                                                             "samples_per_second": 0.1}}
            v = gc.judge_memory(None, step, [self.write(tmp, "m.json", doc)], [])
            self.assertEqual((v.status, v.figures), ("FAIL", "mean memory error 3.00% beyond 2.0%"))
            doc["mean_abs_error"]["peak_memory_bytes"] = row["error"]["peak_memory_bytes"] = 0.01
            v = gc.judge_memory(None, step, [self.write(tmp, "m.json", doc)], [])
            self.assertEqual(v.status, "PASS", v.figures)


class TorchPeer(unittest.TestCase):
    """The torch peer step's rule over pipebench.torch-peer/1 documents made
    by ci/torch_peer.py's own writer (today's H200 figures: the kernels are
    below PyTorch's, and the step must say so)."""

    def doc(self, model, dtype, pb_sps, pt_sps, pb_peak, pt_peak, graph_mb=None):
        s = tp.Shapes(model, 12, 768, 12, 1024, 50257, 50304, 4, 4, dtype, 8, 2, 6, 1)
        pb = {"samples_per_second": pb_sps, "per_microbatch_seconds": 32 / pb_sps / 8,
              "peak_device_bytes": pb_peak}
        eager = dict(tp.timing([32 / pt_sps], s), peak_allocated_bytes=pt_peak)
        graph = tp.timing([8 * graph_mb], s) if graph_mb else None
        return tp.document("r.json", s, "sdpa", pb, eager, graph)

    def docs(self, bf16_sps=70.2, fp32_sps=28.7, tiny_mb=4.5e-3, peak=4.25):
        return {"bf16": self.doc("gpt-small", "bf16", bf16_sps, 180.0, int(peak * 2**30),
                                 int(5.1 * 2**30)),
                "fp32": self.doc("gpt-small", "fp32", fp32_sps, 47.9, 2**30, 2 * 2**30),
                "tiny": self.doc("gpt-tiny", "bf16", 32 / 8 / tiny_mb, 32 / 8 / 12.3e-3, 1, 1,
                                 graph_mb=1.52e-3)}

    def test_todays_figures_fail_showing_each_ratio(self):
        v = gc.peer_verdict(self.docs(), 1.0, 1.3)
        self.assertEqual(v.status, "FAIL")
        self.assertIn("bf16 0.39x samples/s (70.2 vs 180.0), peak 4.25 GiB vs 5.10 GiB", v.figures)
        self.assertIn("fp32 0.60x samples/s (28.7 vs 47.9)", v.figures)
        # Which of sdpa's kernels PyTorch ran, where its profiled step said.
        docs = self.docs()
        docs["fp32"]["pytorch"]["kernels"] = {"sdpa": "efficient", "top": []}
        self.assertIn("fp32 0.60x samples/s (28.7 vs 47.9, PyTorch's sdpa efficient), peak",
                      gc.peer_verdict(docs, 1.0, 1.3).figures)
        self.assertIn("gpt-tiny bf16 per micro-batch 2.96x PyTorch's CUDA-graph replay"
                      " (4.50 vs 1.52 ms; eager 12.30 ms)", v.figures)
        self.assertEqual(v.values["below"], ["bf16 0.39x < 1x samples/s",
                                             "fp32 0.60x < 1x samples/s",
                                             "tiny 2.96x > 1.3x the graph replay"])

    def test_at_the_peers_speed_and_memory_it_passes_and_not_one_byte_above(self):
        v = gc.peer_verdict(self.docs(bf16_sps=180.0, fp32_sps=47.9, tiny_mb=1.3 * 1.52e-3,
                                      peak=5.1), 1.0, 1.3)
        self.assertEqual(v.status, "PASS", v.figures)
        docs = self.docs(bf16_sps=181.0, fp32_sps=50.0, tiny_mb=1.5e-3)
        docs["bf16"]["ratios"]["peak_memory"] = 1.0001
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual(v.values["below"], ["bf16 peak 1.00x PyTorch's"])
        # PyTorch's capture failing leaves the graph criterion unmeasured,
        # not below: the step fails on the measured peak alone.
        docs["tiny"]["graph"] = {"error": "operation not permitted when stream is capturing"}
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["below"], ["bf16 peak 1.00x PyTorch's"])
        self.assertEqual(v.values["unmeasured"], ["tiny per micro-batch over the graph replay"])
        self.assertTrue(v.figures.endswith("; BELOW: bf16 peak 1.00x PyTorch's; NOT MEASURED:"
                                           " tiny per micro-batch over the graph replay"),
                        v.figures)

    def test_pytorch_not_capturing_its_graph_is_not_measured_neither_pass_nor_fail(self):
        docs = self.docs(bf16_sps=181.0, fp32_sps=50.0, tiny_mb=1.5e-3, peak=5.0)
        self.assertEqual(gc.peer_verdict(docs, 1.0, 1.3).status, "PASS")
        docs["tiny"]["graph"] = {
            "error": "RuntimeError: CUDA error: operation not permitted when stream is capturing",
            "raised": "AcceleratorError: CUDA error: operation failed due to a previous error"
                      " during capture"}
        s = tp.Shapes("gpt-tiny", 8, 128, 4, 64, 512, 512, 4, 4, "bf16", 8, 3, 20, 1)
        pb = docs["tiny"]["pipebench"]
        docs["tiny"] = tp.document("r.json", s, "sdpa", pb, docs["tiny"]["pytorch"],
                                   docs["tiny"]["graph"])
        self.assertIsNone(docs["tiny"]["ratios"]["per_microbatch_over_graph"])
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual(v.status, "SKIP", v.figures)  # not a pass, and no failure of pipebench's
        self.assertEqual((v.values["below"], v.values["unmeasured"]),
                         ([], ["tiny per micro-batch over the graph replay"]))
        self.assertIn("bf16 1.01x samples/s (181.0 vs 180.0)", v.figures)
        self.assertIn("gpt-tiny bf16 per micro-batch not measured against PyTorch's CUDA-graph"
                      " replay: PyTorch could not capture its own step (RuntimeError: CUDA error:"
                      " operation not permitted when stream is capturing); pipebench 1.50 ms,"
                      " PyTorch eager 12.30 ms", v.figures)
        self.assertTrue(v.figures.endswith("; NOT MEASURED: tiny per micro-batch over the graph"
                                           " replay"), v.figures)
        self.assertEqual(v.values["tiny"]["graph"]["raised"], docs["tiny"]["graph"]["raised"])
        # A measured criterion below still fails the step, the unmeasured one beside it.
        docs["fp32"] = self.docs(fp32_sps=40.0)["fp32"]
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["below"], ["fp32 0.84x < 1x samples/s"])
        # One case's document skipped (PyTorch saw no device for it): not measured either.
        docs = self.docs(bf16_sps=181.0, fp32_sps=50.0, tiny_mb=1.5e-3, peak=5.0)
        docs["fp32"].update(status="skipped", reason="torch 2.11 sees no CUDA device")
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual((v.status, v.values["unmeasured"]), ("SKIP", ["fp32"]))
        self.assertIn("fp32 not measured: PyTorch skipped (torch 2.11 sees no CUDA device)",
                      v.figures)

    def test_the_step_through_its_judge_and_runner_skips_on_pytorchs_capture_failure(self):
        step = next(s for s in gc.STEPS if s.name == "torch peer")
        docs = self.docs(bf16_sps=181.0, fp32_sps=50.0, tiny_mb=1.5e-3, peak=5.0)
        docs["tiny"]["graph"] = {"error": "RuntimeError: CUDA error: operation not permitted"
                                          " when stream is capturing"}
        with tempfile.TemporaryDirectory() as tmp:
            reads = [Path(tmp) / r.split("/")[-1] for r in step.reads]
            for r, d in zip(reads, docs.values()):
                r.write_text(json.dumps(d))
            v = gc.judge_torch_peer(None, step, reads, [])
            self.assertEqual(v.status, "SKIP", v.figures)
            results = [gc.StepResult("torch peer", v.status, v.figures, v.values)]
            self.assertNotEqual(gc.result_word(results), "failed")
            self.assertIn("SKIP  torch peer", gc.summary_text(results, "now", 1, tmp, 450))

    def test_skipped_documents_skip_and_a_missing_one_fails(self):
        docs = self.docs()
        for d in docs.values():
            d.update(status="skipped", reason="torch 2.11 sees no CUDA device")
        v = gc.peer_verdict(docs, 1.0, 1.3)
        self.assertEqual((v.status, v.figures), ("SKIP", "torch 2.11 sees no CUDA device"))
        step = next(s for s in gc.STEPS if s.name == "torch peer")
        with tempfile.TemporaryDirectory() as tmp:
            reads = [Path(tmp) / r.split("/")[-1] for r in step.reads]
            for r, d in zip(reads, self.docs().values()):
                r.write_text(json.dumps(d))
            self.assertEqual(gc.judge_torch_peer(None, step, reads, []).status, "FAIL")
            reads[0].unlink()
            v = gc.judge_torch_peer(None, step, reads, [])
            self.assertEqual((v.status, v.figures),
                             ("FAIL", "bf16.json: no pipebench.torch-peer/1 document"))
            log = Path(tmp) / "log.txt"
            log.write_text("+ python3 ci/torch_peer.py\ntorch_peer: no preset 'x' in the list\n")
            v = gc.judge_torch_peer(None, step, reads, [gc.Outcome("torch-peer-bf16", log, rc=2)])
            self.assertEqual(v.figures, "torch-peer-bf16: exit 2 (torch_peer: no preset 'x' in"
                                        " the list)")

    def test_it_skips_without_a_gpu_or_without_torch(self):
        step = next(s for s in gc.STEPS if s.name == "torch peer")
        with tempfile.TemporaryDirectory() as tmp:
            ctx = context(tmp, backend="cpu")
            self.assertEqual(gc.run_step(ctx, step).figures, "the rehearsal has no GPU for PyTorch")
            ctx.backend = "cuda"
            ctx.listing["backends"][0]["available"] = True
            with mock.patch.object(gc.importlib.util, "find_spec", return_value=None):
                r = gc.run_step(ctx, step)
            self.assertEqual((r.status, r.figures),
                             ("SKIP", "no torch in %s: PyTorch is the peer" % sys.executable))


def event(name, device, us=1.0, annotation=False):
    """A stand-in for torch.profiler's FunctionEvent: a name, a device_type
    whose str is the enum's ("DeviceType.CPU"), a time range, and whether
    record_function marked it."""
    return SimpleNamespace(name=name, device_type="DeviceType." + device,
                           time_range=SimpleNamespace(elapsed_us=lambda: us),
                           is_user_annotation=annotation)


class TorchPeerProfile(unittest.TestCase):
    """ci/torch_peer.py's reading of one profiled step and of a failed CUDA
    graph, on stand-ins for PyTorch's events and exceptions."""

    # A cuDNN engine whose kernels carry none of the marks sdpa_backend
    # looks for in kernel names.
    CUDNN_UNMARKED = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                      "cudnn_generated_fort_native_gemm_sm90_knob_7"]

    def test_the_backend_is_taken_from_the_ops_before_the_kernels_names(self):
        ops = [event("aten::scaled_dot_product_attention", "CPU"),
               event("aten::_scaled_dot_product_cudnn_attention", "CPU"),
               event("cudaLaunchKernel", "CPU"),
               event("aten::_scaled_dot_product_cudnn_attention_backward", "CPU")]
        kernels = [event(n, "CUDA", 5.0) for n in self.CUDNN_UNMARKED]
        f = tp.profile_figures(ops + kernels, "sdpa")
        self.assertEqual((f["sdpa"], f["sdpa_from"]), ("cudnn", "ops"))
        # Without the op the kernels' names read as the math fallback.
        f = tp.profile_figures(kernels, "sdpa")
        self.assertEqual((f["sdpa"], f["sdpa_from"]), ("math", "kernel names"))
        for op, backend in (("aten::_scaled_dot_product_flash_attention", "flash"),
                            ("aten::_scaled_dot_product_efficient_attention_backward",
                             "efficient"),
                            ("aten::_scaled_dot_product_attention_math", "math")):
            f = tp.profile_figures([event(op, "CPU")] + kernels, "sdpa")
            self.assertEqual((f["sdpa"], f["sdpa_from"]), (backend, "ops"), op)
        # A kernel on the device named like an op is no op; a marked kernel
        # name is the fallback's answer.
        f = tp.profile_figures([event("aten::_scaled_dot_product_flash_attention", "CUDA"),
                                event("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "CUDA")], "sdpa")
        self.assertEqual((f["sdpa"], f["sdpa_from"]), ("efficient", "kernel names"))
        self.assertIsNone(tp.sdpa_backend_of_ops(["aten::mm", "aten::softmax"]))
        self.assertEqual(tp.sdpa_backend(self.CUDNN_UNMARKED,
                                         ["aten::_scaled_dot_product_cudnn_attention"]), "cudnn")
        f = tp.profile_figures(ops + kernels, "naive")
        self.assertEqual((f["sdpa"], f["sdpa_from"]), (None, None))

    def test_the_kernel_figures_count_kernels_only_and_the_copies_apart(self):
        events = [event("gemm", "CUDA", 3.0), event("softmax", "CUDA", 1.0),
                  event("Memcpy HtoD (Pageable -> Device)", "CUDA", 2.0),
                  event("Memset (Device)", "CUDA", 0.5),
                  event("Optimizer.step#SGD.step", "CUDA", 9.0, annotation=True),
                  event("aten::mm", "CPU", 7.0)]
        f = tp.profile_figures(events, "sdpa")
        self.assertEqual(f["step_kernel_seconds"], 4.0e-6)
        self.assertAlmostEqual(f["step_copy_seconds"], 2.5e-6)
        self.assertEqual([(k["name"], k["share"]) for k in f["top"]],
                         [("gemm", 0.75), ("softmax", 0.25)])
        self.assertEqual(tp.profile_figures(events[2:], "sdpa"),
                         {"error": "the profiler recorded no kernels"})

    def test_a_failed_capture_records_the_ops_error_and_the_one_raised(self):
        try:
            try:
                raise RuntimeError("CUDA error: operation not permitted when stream is"
                                   " capturing\nCUDA kernel errors might be reported later")
            finally:
                raise RuntimeError("CUDA error: operation failed due to a previous error"
                                   " during capture")
        except RuntimeError as e:
            raised = e
        self.assertEqual(tp.graph_error(raised), {
            "error": "RuntimeError: CUDA error: operation not permitted when stream is capturing",
            "raised": "RuntimeError: CUDA error: operation failed due to a previous error during"
                      " capture"})
        self.assertEqual(tp.graph_error(MemoryError("out of memory")),
                         {"error": "MemoryError: out of memory"})
        # An error raised while handling an unrelated one is its own reason.
        try:
            try:
                raise KeyError("handled inside torch")
            except KeyError:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except RuntimeError as e:
            raised = e
        self.assertEqual(tp.graph_error(raised), {
            "error": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"})

    def fake_torch(self):
        """A torch whose CUDA calls are recorded and do nothing."""
        torch = mock.MagicMock()
        torch.cuda.max_memory_allocated.return_value = 2**30
        torch.cuda.max_memory_reserved.return_value = 2**31
        return torch

    def measure(self, torch, captured):
        """torch_peer.measure with --graph on a fake torch, the model and
        the timing stubbed: `captured` is the step the graph path runs."""
        s = tp.Shapes("gpt-tiny", 8, 128, 4, 64, 512, 512, 4, 4, "bf16", 8, 3, 20, 1)
        steps = {True: lambda: None, False: captured}
        with mock.patch.object(tp, "build_model"), \
                mock.patch.object(tp, "make_step", lambda *a, cache: steps[cache]), \
                mock.patch.object(tp, "timed_steps", return_value=[0.012]), \
                mock.patch.object(tp, "kernel_breakdown", return_value={"error": "stub"}):
            return tp.measure(torch, s, "sdpa", True)

    def test_the_graph_is_warmed_up_and_captured_on_one_side_stream(self):
        torch = self.fake_torch()
        eager, graph = self.measure(torch, lambda: None)
        self.assertEqual(graph["per_microbatch_seconds"], 0.012 / 8)
        side = torch.cuda.Stream.return_value
        torch.cuda.stream.assert_called_once_with(side)
        self.assertIs(torch.cuda.graph.call_args.kwargs["stream"], side)

    def test_a_failing_warm_up_or_capture_keeps_the_eager_figures(self):
        def oom():
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        torch = self.fake_torch()
        eager, graph = self.measure(torch, oom)  # the first warm-up step fails
        self.assertEqual((eager["step_seconds"], eager["peak_allocated_bytes"]), (0.012, 2**30))
        self.assertEqual(graph, {"error": "RuntimeError: CUDA out of memory. Tried to allocate"
                                          " 2.00 GiB"})
        torch.cuda.graph.assert_not_called()
        # The capture's op fails and capture_end, on the way out, raises its own.
        calls = []

        def fourth_fails():
            calls.append(1)
            if len(calls) == 4:
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        torch = self.fake_torch()
        torch.cuda.graph.return_value.__exit__.side_effect = RuntimeError(
            "CUDA error: operation failed due to a previous error during capture")
        eager, graph = self.measure(torch, fourth_fails)
        self.assertEqual(graph["error"], "RuntimeError: CUDA error: operation not permitted when"
                                         " stream is capturing")
        self.assertIn("previous error during capture", graph["raised"])
        self.assertEqual(eager["step_seconds"], 0.012)

    def test_the_fp32_summary_says_how_pytorch_multiplied(self):
        s = tp.Shapes("gpt-small", 12, 768, 12, 1024, 50257, 50304, 4, 4, "fp32", 8, 2, 6, 1)
        pb = {"samples_per_second": 28.7, "per_microbatch_seconds": 32 / 28.7 / 8,
              "peak_device_bytes": 2**30}
        eager = dict(tp.timing([32 / 47.9], s), peak_allocated_bytes=2 * 2**30,
                     kernels={"sdpa": "efficient", "sdpa_from": "ops", "top": []})
        doc = tp.document("r.json", s, "sdpa", pb, eager)
        self.assertTrue(doc["summary"].startswith(
            "gpt-small fp32 (matmuls TF32 off) M=8, sdpa (efficient, 3xTF32) attention:"
            " pipebench 28.7 samples/s, PyTorch 47.9 (0.60x)"), doc["summary"])
        eager["kernels"]["sdpa"] = "math"  # the fallback's matmuls: TF32 off too
        doc = tp.document("r.json", s, "sdpa", pb, eager)
        self.assertIn("fp32 (matmuls TF32 off) M=8, sdpa (math) attention", doc["summary"])
        doc = tp.document("r.json", dataclasses.replace(s, dtype="bf16"), "sdpa", pb, eager)
        self.assertIn("gpt-small bf16 M=8, sdpa (math) attention", doc["summary"])


class Selection(unittest.TestCase):
    def test_names_are_taken_in_any_case_with_spaces_dashes_or_underscores(self):
        self.assertEqual(gc.parse_selection("GPU-tests, sweep_p=2,Sweep  P=4,,nights", gc.STEPS),
                         {"gpu tests", "sweep P=2", "sweep P=4", "nights"})
        self.assertEqual(gc.parse_selection("p2p-1RANK", gc.STEPS), {"p2p 1rank"})
        for empty in (None, "", " , "):
            self.assertIsNone(gc.parse_selection(empty, gc.STEPS))

    def test_an_unknown_name_is_exit_2_naming_it_and_the_steps(self):
        with mock.patch.dict(gc.os.environ, {"PPB_GPU_CHECK_STEPS": "gemm,sweep P=3"}), \
                mock.patch.object(gc, "check", side_effect=AssertionError("the check started")):
            with contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(gc.main(["gpu_check.py"]), 2)
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("gpu-check: PPB_GPU_CHECK_STEPS: no step 'sweep P=3'"
                                            " (the steps: gpu-tests, sweep-p=2, check-bf16-p=4,"),
                        lines[0])
        self.assertTrue(lines[0].endswith(", nccl-pipe, nights)"), lines[0])

    def test_an_unselected_step_is_a_skip_saying_so_and_not_a_failure(self):
        gemm = next(s for s in gc.STEPS if s.name == "gemm")
        nights = next(s for s in gc.STEPS if s.name == "nights")
        with tempfile.TemporaryDirectory() as tmp:
            ctx = context(tmp)  # no selection: the default steps, and nights is not one
            self.assertEqual(gc.run_step(ctx, gemm).figures,
                             "ppb_gemm_bench is not in this build (built without CUDA)")
            r = gc.run_step(ctx, nights)
            ctx.selected = {"nights"}
            results = [r, gc.run_step(ctx, gemm)]
        self.assertEqual([(x.status, x.figures) for x in results],
                         [("SKIP", "not selected (PPB_GPU_CHECK_STEPS)")] * 2)
        self.assertIn("SKIP  gemm        not selected (PPB_GPU_CHECK_STEPS)",
                      gc.summary_text(results, "now", 1, "out", 60).splitlines())
        self.assertEqual(gc.result_word(results), "passed")

    def test_memory_without_a_selected_sweep_skips_and_reads_no_older_sweep(self):
        memory = next(s for s in gc.STEPS if s.name == "memory")
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("sweep-P2", "sweep-P4"):  # an earlier check's folders
                (Path(tmp) / d).mkdir()
            ctx = context(tmp)
            ctx.selected = {"memory"}
            r = gc.run_step(ctx, memory)
            self.assertEqual((r.status, r.figures), (
                "SKIP", "its inputs are the sweeps' results, and PPB_GPU_CHECK_STEPS selected no"
                        " sweep"))
            ctx.selected = {"memory", "sweep P=4"}
            self.assertEqual(ctx.vars()["sweep_dirs"], [str(Path(tmp) / "sweep-P4")])

    def listing(self, seconds):
        with mock.patch.dict(gc.os.environ, {"PPB_GPU_CHECK_STEPS": "nights,Sweep P=2",
                                             "PPB_GPU_CHECK_SECONDS": seconds}):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(gc.main(["gpu_check.py", "--list"]), 0)
        return {line.split()[0]: line.split() for line in out.getvalue().splitlines()[1:-2]}

    def test_list_shows_each_step_its_default_selection_limit_and_the_running_total(self):
        rows = self.listing("700")
        self.assertEqual(set(rows), {gc.step_key(s.name) for s in gc.STEPS})
        self.assertEqual(rows["sweep-p=2"][1:8], ["yes", "yes", "90", "s", "90", "s", "fits"])
        self.assertEqual(rows["sweep-p=2"][8:], ["sweep-P2"])
        self.assertEqual(rows["sweep-p=4"][1:7], ["yes", "no", "90", "s", "-", "-"])
        self.assertEqual(rows["nights"][1:11], ["no", "yes", "540", "s", "630", "s", "fits",
                                                "nights-1", "nights-2", "nights-validate"])
        # Where the total passes the budget the step is marked.
        self.assertEqual(self.listing("600")["nights"][5:8], ["630", "s", "CUT"])
        self.assertEqual(self.listing("60")["sweep-p=2"][7], "CUT")



class Order(unittest.TestCase):
    def test_correctness_runs_before_speed_and_the_figures(self):
        names = [s.name for s in gc.STEPS]
        self.assertEqual(names[:9], ["gpu tests", "sweep P=2", "check bf16 P=4", "sanitizer",
                                     "sweep P=4", "memory", "torch peer", "unit bench", "peer"])
        self.assertEqual(names[-1], "nights")

    def test_a_step_comes_after_the_steps_whose_files_it_reads(self):
        at = {}
        for i, step in enumerate(gc.STEPS):
            at.setdefault(step.name, i)
        # memory reads both sweeps' folders, nights the gemm step's files.
        self.assertIn("{sweep_dirs}", next(s for s in gc.STEPS if s.name == "memory").runs[0].argv)
        self.assertLess(max(at["sweep P=2"], at["sweep P=4"]), at["memory"])
        nights = next(s for s in gc.STEPS if s.name == "nights")
        self.assertEqual(nights.reads[-2:], ("gemm-bf16.json", "gemm-fp32.json"))
        self.assertLess(at["gemm"], at["nights"])

    def test_tests_start_longest_timeout_first_and_the_timing_sensitive_alone_after(self):
        def t(name, timeout, serial=False):
            return {"name": name, "timeout": timeout, "run_serial": serial}
        tests = [t("CudaGpu.A", None), t("run_cuda_check_fp32", 300), t("gpu_p2p", 100),
                 t("CudaPlant.B", None), t("gpu_gemm_bench", 150), t("run_cuda_check_bf16", 300),
                 t("serial", 30, serial=True)]
        shared, alone = gc.test_order(tests, 180)
        self.assertEqual([x["name"] for x in shared],
                         ["run_cuda_check_fp32", "run_cuda_check_bf16", "CudaGpu.A", "gpu_p2p"])
        self.assertEqual([x["name"] for x in alone], ["CudaPlant.B", "gpu_gemm_bench", "serial"])


def fake_test(name, command, timeout=None, serial=False, cwd="/tmp"):
    return {"name": name, "command": list(command), "cwd": cwd, "env": {}, "timeout": timeout,
            "skip_return_code": None, "skip_regex": [], "pass_regex": [], "fail_regex": [],
            "will_fail": False, "run_serial": serial}


class GpuTestsWindow(QuickStops):
    def test_a_test_the_window_stops_or_never_starts_is_cut_not_failed(self):
        ctx = context(self.tmp)
        ctx.tests = [fake_test("long", ("sleep", "10")),             # the window stops it
                     fake_test("own", ("sleep", "10"), timeout=1),   # its own TIMEOUT: failed
                     fake_test("quick", ("true",), timeout=1),
                     fake_test("CudaPlant.X", ("true",))]            # alone, after: no time left
        step = gc.Step("gpu tests", "tests", execute="tests", args={"limit": 3, "jobs": 2},
                       reads=("gpu-tests.json",))
        t0 = time.monotonic()
        r = gc.run_step(ctx, step)
        self.assertLess(time.monotonic() - t0, 8)
        doc = json.loads((Path(self.tmp) / "gpu-tests.json").read_text())
        got = {t["name"]: (t["status"], t.get("cut")) for t in doc["tests"]}
        self.assertEqual(got, {"long": ("cut", "window"), "own": ("failed", None),
                               "quick": ("passed", None), "CudaPlant.X": ("cut", "window")})
        self.assertEqual(r.status, "FAIL")
        self.assertIn("4 tests: 1 passed, 0 skipped, 1 failed, 2 cut (the step's 3 s: long,"
                      " CudaPlant.X) (failed: own;", r.figures)
        # Without the failure the step is CUT, never passed.
        ctx.tests = ctx.tests[:1]
        r = gc.run_step(ctx, dataclasses.replace(step, args={"limit": 1, "jobs": 2}))
        self.assertEqual((r.status, r.values["cut_tests"]), ("CUT", ["long"]))


class Raising(unittest.TestCase):
    def test_a_raising_judge_or_executor_is_that_steps_failure_and_the_run_goes_on(self):
        def judge(ctx, step, reads, outcomes):
            raise ValueError("no figures\nsecond line")

        def boom(ctx, step, variables):
            raise KeyError("tests")
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.dict(gc.JUDGES, {"raises": judge, "ok": lambda *a: gc.Verdict("PASS", "ok")}), \
                mock.patch.dict(gc.EXECUTORS, {"boom": boom}):
            ctx = context(tmp)
            steps = (gc.Step("bad judge", "raises", runs=(gc.Run("x", ("true",), limit=10),)),
                     gc.Step("bad run", "ok", execute="boom"),
                     gc.Step("after", "ok", runs=(gc.Run("y", ("true",), limit=10),)))
            s = gc.Session(ctx, steps)
            with contextlib.redirect_stdout(io.StringIO()):
                gc.run_steps(s)
            got = [(r.name, r.status, r.figures) for r in s.results]
            self.assertEqual(got, [
                ("bad judge", "FAIL", "judge raised ValueError: no figures (logs/bad-judge.raised.txt)"),
                ("bad run", "FAIL", "run raised KeyError: 'tests' (logs/bad-run.raised.txt)"),
                ("after", "PASS", "ok")])
            self.assertIn("Traceback", (Path(tmp) / "logs" / "bad-judge.raised.txt").read_text())
            # Steps of one name keep their tracebacks apart by their variables.
            cost = [st for st in gc.STEPS if st.name == "cupti cost"]
            self.assertEqual(len(cost), 2)
            names = set()
            for st in cost:
                try:
                    raise ValueError("x")
                except ValueError as e:
                    names.add(re.search(r"logs/(\S+)\)", gc.raised(ctx, st, "judge", e)).group(1))
            self.assertEqual(len(names), 2, names)


class Archive(unittest.TestCase):
    def test_the_archive_leaves_out_traces_huge_files_and_then_the_largest(self):
        with tempfile.TemporaryDirectory() as tmp:
            work, out = Path(tmp) / "work", Path(tmp) / "out"
            for rel, size in (("logs/sweep-P2.txt", 100), ("sweep-P2/1f1b.json", 200),
                              ("sweep-P2/1f1b.trace.json", 300), ("sweep-P2/1f1b.trace/rank0.json", 50),
                              ("nsys/run.nsys-rep", 10), ("huge.log", 5000), (gc.WORK_MARK, 1)):
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_bytes(b"x" * size)
            out.mkdir()
            a = gc.pack_work(work, out / gc.ARCHIVE_NAME, huge=4000)
            with tarfile.open(out / gc.ARCHIVE_NAME) as t:
                names = set(t.getnames())
                left = t.extractfile(gc.LEFT_OUT_NAME).read().decode()
            self.assertEqual(names, {"logs/sweep-P2.txt", "sweep-P2/1f1b.json", gc.LEFT_OUT_NAME})
            self.assertEqual((a["members"], a["left_out"]["traces"], a["left_out"]["trace_bytes"]),
                             (2, 3, 360))
            self.assertEqual(a["left_out"]["huge"], [{"path": "huge.log", "bytes": 5000}])
            self.assertIn("trace", left)
            self.assertIn("sweep-P2/1f1b.trace/rank0.json", left)
            self.assertEqual(sorted(p.name for p in out.iterdir()), [gc.ARCHIVE_NAME])
            # Over the limit: the largest files go first (random bytes do not compress).
            for i, kib in enumerate((40, 80, 120)):
                (work / ("r%d.bin" % i)).write_bytes(os.urandom(kib * 1024))
            a = gc.pack_work(work, out / gc.ARCHIVE_NAME, huge=4 * 2**20, limit=150 * 1024)
            self.assertLessEqual(a["bytes"], 150 * 1024)
            self.assertEqual(a["left_out"]["archive_full"][-1], {"path": "r2.bin", "bytes": 120 * 1024})
            self.assertNotIn("r0.bin", [x["path"] for x in a["left_out"]["archive_full"]])
            self.assertIn("largest files", gc.archive_line(a))

    def test_a_member_holds_the_bytes_read_not_the_size_found_before(self):
        # A /proc file's size reads 0 and its content does not: as for a
        # log cut short or grown while it is packed, the member's header
        # says what was read, and at most `most` bytes.
        src = Path("/proc/self/mountinfo")
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "a.tar"
            with tarfile.open(archive, "w") as t:
                self.assertEqual(gc.add_member(t, src, "whole", 1 << 20), 1)
                self.assertEqual(gc.add_member(t, src, "head", 10), 1)
                self.assertEqual(gc.add_member(t, Path(tmp) / "gone", "gone", 10), 0)
            with tarfile.open(archive) as t:
                self.assertEqual(t.getnames(), ["whole", "head"])
                whole = t.extractfile("whole").read()
                self.assertGreater(len(whole), 10)
                self.assertEqual(t.extractfile("head").read(), whole[:10])


def ok_judge(ctx, step, reads, outcomes):
    return gc.Verdict("PASS", "fine")


class Checkpoints(unittest.TestCase):
    """gc.check on a table of short fake steps, set-up skipped."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.ctx = gc.Context(out=self.tmp / "out", work=self.tmp / "work", budget=60)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_the_summary_is_rewritten_after_every_step_and_out_holds_three_files(self):
        out = str(self.ctx.out)
        steps = (gc.Step("first", "ok", runs=(gc.Run("first", ("sh", "-c", "echo one"), limit=10),)),
                 gc.Step("second", "ok", runs=(gc.Run("second", (
                     "sh", "-c", "cp %s/gpu-check.json {work}/seen.json; mkdir -p {work}/s.trace;"
                     " echo t > {work}/s.trace/rank0.json; echo t > {work}/s.trace.json" % out),
                     limit=10),)),
                 gc.Step("unselected", "ok", default=False, runs=(gc.Run("u", ("true",), limit=1),)))
        with mock.patch.dict(gc.JUDGES, {"ok": ok_judge}), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            code = gc.check(self.ctx, steps=steps, setup=lambda s: True)
        self.assertEqual(code, 0)
        seen = json.loads((self.ctx.work / "seen.json").read_text())
        self.assertEqual((seen["result"], seen["current"]["name"], seen["pending"]),
                         ("running", "second", []))
        self.assertEqual([(x["name"], x["status"]) for x in seen["steps"]], [("first", "PASS")])
        self.assertEqual(seen["archive"]["file"], gc.ARCHIVE_NAME)  # packed after "first"
        self.assertIn(">> start first (limit 10 s, budget left ", printed.getvalue())
        doc = json.loads((self.ctx.out / "gpu-check.json").read_text())
        self.assertEqual(doc["result"], "passed")
        self.assertEqual([(x["name"], x["status"]) for x in doc["steps"]],
                         [("first", "PASS"), ("second", "PASS"), ("unselected", "SKIP")])
        files = sorted(p.name for p in self.ctx.out.iterdir())
        self.assertEqual(files, sorted(["gpu-check.txt", "gpu-check.json", gc.ARCHIVE_NAME]))
        self.assertLessEqual(len(files), 8)
        with tarfile.open(self.ctx.out / gc.ARCHIVE_NAME) as t:
            names = set(t.getnames())
        self.assertTrue({"logs/first.txt", "logs/second.txt", "seen.json"} <= names, names)
        self.assertFalse([n for n in names if ".trace" in n], names)
        self.assertEqual(doc["archive"]["left_out"]["traces"], 2)

    def test_a_work_folder_of_something_else_is_refused_and_an_earlier_checks_emptied(self):
        self.ctx.work.mkdir()
        (self.ctx.work / "mine.txt").write_text("x")
        with self.assertRaisesRegex(gc.UsageError, "^PPB_GPU_CHECK_WORK: .* no earlier check's"):
            gc.prepare_folders(self.ctx)
        (self.ctx.work / gc.WORK_MARK).write_text("")
        gc.prepare_folders(self.ctx)
        self.assertEqual(sorted(p.name for p in self.ctx.work.iterdir()), [gc.WORK_MARK, "logs"])

    def test_work_and_out_must_lie_apart(self):
        env = {"OUT": str(self.tmp / "o"), "PPB_GPU_CHECK_WORK": str(self.tmp / "o" / "w")}
        with mock.patch.dict(gc.os.environ, env), \
                self.assertRaisesRegex(gc.UsageError, "must lie apart"):
            gc.settings()


STOP_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
import gpu_check as gc
from pathlib import Path
gc.JUDGES["ok"] = lambda *a: gc.Verdict("PASS", "fine")
tmp, case = Path(sys.argv[2]), sys.argv[3]
ctx = gc.Context(out=tmp / "out", work=tmp / "work", budget=120)
# The slow command writes the pid of a sleeper in a process group of its
# own inside the command's session (as Open MPI may start its ranks).
(tmp / "sleeper.py").write_text("import os; os.setpgid(0, 0); os.execvp('sleep', ['sleep', '60'])")
script = '"$0" "$1" & echo $! > {work}/pid; wait'
slow = ("sh", "-c", script, sys.executable, str(tmp / "sleeper.py"))
first = gc.Run("first", ("false",) if case == "failed-first" else ("true",), limit=10)
if case == "tests":
    ctx.tests = [{"name": n, "command": list(c), "cwd": str(tmp), "env": {}, "timeout": None,
                  "skip_return_code": None, "skip_regex": [], "pass_regex": [],
                  "fail_regex": [], "will_fail": False, "run_serial": False}
                 for n, c in (("fails", ("false",)),
                              ("slow", ("sh", "-c", "sleep 0.5; " + slow[2].replace(
                                  "{work}", str(tmp / "work"))) + slow[3:]))]
    middle = gc.Step("gpu tests", "tests", execute="tests", args={"limit": 90, "jobs": 2},
                     reads=("gpu-tests.json",))
else:
    middle = gc.Step("slow", "ok", runs=(first, gc.Run("slow", slow, limit=90)))
steps = (gc.Step("before", "ok", runs=(gc.Run("before", ("true",), limit=10),)), middle,
         gc.Step("after", "ok", runs=(gc.Run("after", ("true",), limit=10),)))
sys.exit(gc.check(ctx, steps=steps, setup=lambda s: True))
"""


class Stop(unittest.TestCase):
    def stop_during(self, tmp, case):
        """Runs STOP_SCRIPT's `case`, SIGTERMs the check once the slow command's
        sleeper runs, and returns the summary's steps as (name, status,
        figures) after checking how the check ended: promptly, exit 1, the
        sleeper (in a process group of its own) gone with its session."""
        p = subprocess.Popen([sys.executable, "-c", STOP_SCRIPT, str(ROOT / "ci"), str(tmp), case],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
        pid_file = tmp / "work" / "pid"
        for _ in range(400):  # 20 s at most, for a loaded host
            if pid_file.is_file() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        sleeper = int(pid_file.read_text())
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        self.assertLess(time.monotonic() - t0, 8)
        self.assertEqual(p.returncode, 1, out)
        self.assertIn(">> SIGTERM: stopping", out)
        try:
            state = Path("/proc/%d/stat" % sleeper).read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        self.assertIn(state, ("gone", "Z"), "the sleeper outlived the check")
        self.assertTrue((tmp / "out" / gc.ARCHIVE_NAME).is_file())
        self.doc = json.loads((tmp / "out" / "gpu-check.json").read_text())
        self.text = (tmp / "out" / "gpu-check.txt").read_text()
        self.assertEqual(self.doc["stopped_by"], "SIGTERM")
        got = [(x["name"], x["status"], x["figures"]) for x in self.doc["steps"]]
        self.assertEqual(got[0], ("before", "PASS", "fine"))
        self.assertEqual(got[2], ("after", "CUT", "not started: the check was stopped (SIGTERM)"))
        return got

    def test_sigterm_stops_the_running_command_and_leaves_the_summary(self):
        with tempfile.TemporaryDirectory() as tmp:
            got = self.stop_during(Path(tmp), "slow")
            self.assertEqual(got[1][:2], ("slow", "CUT"))
            self.assertTrue(got[1][2].startswith("slow: stopped by SIGTERM after "), got[1])
            self.assertEqual(self.doc["result"], "cut")
            self.assertTrue(self.text.splitlines()[-1].startswith("RESULT: INCOMPLETE: SIGTERM stopped"))

    def test_a_failure_finished_before_the_signal_fails_its_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            got = self.stop_during(Path(tmp), "failed-first")
            self.assertEqual(got[1][:2], ("slow", "FAIL"))
            self.assertRegex(got[1][2], r"^first: exit 1 \(.*\); then slow: stopped by SIGTERM after ")
            self.assertEqual(self.doc["result"], "failed")

    def test_the_gpu_tests_finished_before_the_signal_are_judged_and_recorded(self):
        with tempfile.TemporaryDirectory() as tmp:
            got = self.stop_during(Path(tmp), "tests")
            self.assertEqual(got[1][:2], ("gpu tests", "FAIL"))
            self.assertIn("2 tests: 0 passed, 0 skipped, 1 failed, 1 cut (the check was stopped:"
                          " slow) (failed: fails;", got[1][2])
            doc = json.loads((Path(tmp) / "work" / "gpu-tests.json").read_text())
            self.assertEqual({t["name"]: (t["status"], t.get("cut")) for t in doc["tests"]},
                             {"fails": ("failed", None), "slow": ("cut", "signal")})


class Probes(unittest.TestCase):
    def test_a_probe_without_an_answer_is_a_failure_saying_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            s = gc.Session(context(tmp))
            t0 = time.monotonic()
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertIsNone(gc.probe_run(s, "machine", ["sleep", "10"], seconds=1))
                self.assertIsNone(gc.probe_run(s, "list", ["/no/such/pipebench", "list"]))
            self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual([(r.status, r.name) for r in s.results], [("FAIL", "machine"),
                                                                   ("FAIL", "list")])
        self.assertEqual(s.results[0].figures, "sleep 10: no answer in 1 s (stopped)")
        self.assertTrue(s.results[1].figures.startswith("/no/such/pipebench: cannot start:"))

    def test_the_tools_are_looked_for_on_the_steps_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = Path(tmp) / "bundle-bin"
            bin_dir.mkdir()
            (bin_dir / "mpirun").write_text("#!/bin/sh\n")
            (bin_dir / "mpirun").chmod(0o755)
            ctx = context(tmp)
            ctx.env["PATH"] = str(bin_dir)
            s = gc.Session(ctx)
            (Path(tmp) / "logs").mkdir()
            with contextlib.redirect_stdout(io.StringIO()):
                gc.probe_tools(s)
        self.assertIn(" mpirun ", " " + s.results[0].figures + " ")
        self.assertIn("!nvcc", s.results[0].figures)
        self.assertNotIn("mpirun", s.results[0].values["missing_tools"])


class BuildChoice(unittest.TestCase):
    def test_a_failed_bundle_ends_the_check_without_a_build_here_unless_asked(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx, archive = broken_bundle(tmp, build=None)
            s = gc.Session(ctx)
            with mock.patch.object(gc, "BUNDLE", archive), \
                    mock.patch.object(gc, "build_here", side_effect=AssertionError("built")), \
                    contextlib.redirect_stdout(io.StringIO()):
                gc.find_build(s, [], [])
            self.assertIsNone(ctx.build)
            self.assertEqual([(r.status, r.name) for r in s.results], [("FAIL", "bundle"),
                                                                       ("INFO", "build")])
            self.assertIn("PPB_GPU_CHECK_BUILD_HERE=1", s.results[1].figures)
            ctx.build_here = True
            with mock.patch.object(gc, "BUNDLE", archive), \
                    mock.patch.object(gc, "build_here", return_value=None) as built, \
                    contextlib.redirect_stdout(io.StringIO()):
                gc.find_build(gc.Session(ctx), [], [])
            built.assert_called_once()

    def test_no_bundle_and_no_build_is_a_failure_naming_both(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = context(tmp, build=None)
            s = gc.Session(ctx)
            with mock.patch.object(gc, "BUNDLE", Path(tmp) / "none.tar.xz"), \
                    mock.patch.object(gc, "build_here", side_effect=AssertionError("built")), \
                    contextlib.redirect_stdout(io.StringIO()):
                gc.find_build(s, [], [])
        self.assertEqual((s.results[0].status, s.results[0].name), ("FAIL", "build"))
        self.assertIn("no bundle", s.results[0].figures)


class DryRun(unittest.TestCase):
    def test_dry_run_prints_each_selected_steps_commands_expanded(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"OUT": str(Path(tmp) / "o"), "PPB_GPU_CHECK_WORK": str(Path(tmp) / "w"),
                   "PPB_GPU_CHECK_STEPS": "sweep-p=2,memory", "PPB_GPU_BUNDLE_DIR": "/b"}
            with mock.patch.dict(gc.os.environ, env), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(gc.main(["gpu_check.py", "--dry-run"]), 0)
            self.assertFalse(Path(tmp, "o").exists() or Path(tmp, "w").exists())
        text = out.getvalue()
        self.assertNotIn("{", text)
        self.assertIn("# sweep P=2: limit 90 s, 90 s in all\n", text)
        self.assertIn("mpirun -np 2 --oversubscribe /b/build/bench/pipebench run --backend cuda",
                      text)
        self.assertIn("plan --validate %s/w/sweep-P2 --format json > %s/w/memory.json" % (tmp, tmp),
                      text)
        self.assertNotIn("# gpu tests", text)

def junit(folder, cases):
    """A report.junit.xml in folder as pipebench report writes it: cases of
    (name, classname, failure, skipped, system-out)."""
    folder.mkdir(parents=True, exist_ok=True)
    body = ""
    for name, cls, failure, skipped, out in cases:
        body += '<testcase name="%s" classname="%s" time="0.1">' % (name, cls)
        if failure:
            body += '<failure type="regression" message="%s">%s</failure>' % (
                failure.split("\n")[0], failure)
        if skipped:
            body += '<skipped message="%s"/>' % skipped
        if out:
            body += "<system-out>%s</system-out>" % out
        body += "</testcase>"
    (folder / "report.junit.xml").write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="m">%s</testsuite></testsuites>' % body)


class Nights(unittest.TestCase):
    """The nights step's judge on synthetic report, planner, probe and
    bench files, as the step leaves them under OUT."""
    WORK = " [gpt-small, mbs 1, bf16, padded_vocab 50304]"
    PLANT = " [planted stage 1 x1.10]"

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.step = next(s for s in gc.STEPS if s.name == "nights")
        self.ctx = context(self.tmp)
        self.reads = [self.tmp / r for r in self.step.reads]
        combos = ("1f1b x balanced P=2 M=4", "zb-v x balanced P=2 M=4")
        junit(self.reads[0], [(c + self.WORK, "pipebench.x", "", "", "new combination: not in the"
                               " baseline") for c in combos])
        junit(self.reads[1], [(combos[0] + self.WORK, "pipebench.x", "", "", ""),
                              (combos[1] + self.WORK, "pipebench.x", "", "undecidable: samples/s",
                               ""),
                              ("GPU 0 H200 gemm_bf16_tflops", "pipebench.health", "", "", "")])
        self.planted([(combos[0] + self.WORK + self.PLANT, "pipebench.x",
                       "samples/s 100 -&gt; 90 (-10%)\nstage 1 compute 0.10 -&gt; 0.11 (+10%)", "",
                       "planted slowdown: stage 1 x1.10"),
                      (combos[1] + self.WORK + self.PLANT, "pipebench.x", "", "", "")])
        rows = [{"config": {"model": "gpt-small"},
                 "error": {"samples_per_second": e, "peak_memory_bytes": m}}
                for e, m in ((0.04, 0.01), (-0.02, -0.005))]
        rows.append({"config": {"model": "gpt-tiny"},
                     "error": {"samples_per_second": 0.5, "peak_memory_bytes": 0.5}})
        self.validation = {"schema": "pipebench.plan-validation/1", "combinations": rows,
                           "refused": []}
        self.write("nights-validate.json", self.validation)
        for night, k in (("nights/1", 1.0), ("nights/2", 1.02)):
            self.write(night + "/health/health.json", {
                "schema": "pipebench.health/1", "config": {"model": "gpt-small"},
                "gpus": [{"name": "H200", "figures": {
                    "gemm_bf16_tflops": [150 * k, 148 * k], "gemm_fp32_tflops": [48 * k, 47 * k],
                    "copy_d2d_gbps": [2900], "copy_h2d_gbps": [50], "copy_d2h_gbps": [52]}}]})
        self.outcomes = {"nights-1": 0, "nights-2": 0, "nights-planted": 1, "nights-validate": 0}

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, name, doc):
        (self.tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (self.tmp / name).write_text(json.dumps(doc))

    def planted(self, cases):
        junit(self.reads[2], cases)

    def judge(self):
        outcomes = [gc.Outcome(t, self.tmp / "logs" / (t + ".txt"), rc=rc)
                    for t, rc in self.outcomes.items()]
        return gc.judge_nights(self.ctx, self.step, self.reads, outcomes)

    def test_clean_nights_and_a_caught_plant_pass_with_the_planner_and_the_probe(self):
        v = self.judge()
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertEqual(v.values["night2"]["compared"], 2)
        self.assertEqual(v.values["night2"]["undecidable"], ["zb-v x balanced P=2 M=4"])
        self.assertEqual(v.values["planted"]["caught"], ["1f1b x balanced P=2 M=4"])
        # gpt-small's rows only: (4% + 2%) / 2 and (1% + 0.5%) / 2.
        self.assertAlmostEqual(v.values["validate"]["mean_abs_samples_error"], 0.03)
        self.assertAlmostEqual(v.values["validate"]["mean_abs_memory_error"], 0.0075)
        self.assertIn("night 2 against night 1: 0 regressions, 2 of 2 compared (1 undecidable);"
                      " planted: 1 of 2 combinations a regression naming stage 1"
                      " (1f1b x balanced P=2 M=4)", v.figures)
        self.assertIn("ppb_gemm_bench: not run in this check", v.figures)
        # This check's ppb_gemm_bench: the probe's medians over both nights
        # (bf16 150.48 of 148, 150, 150.96, 153; fp32 47.97) within 5% of
        # the bench's backend column.
        for dtype, tflops in (("bf16", 151.0), ("fp32", 47.5)):
            self.write("gemm-%s.json" % dtype, {"schema": "pipebench.gemm/1", "dtype": dtype,
                                                "model": "gpt-small", "backend_tflops": tflops})
        v = self.judge()
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertAlmostEqual(v.values["health"]["gemm_bf16_over_bench"], 150.48 / 151.0)
        self.write("gemm-fp32.json", {"schema": "pipebench.gemm/1", "dtype": "fp32",
                                      "model": "gpt-small", "backend_tflops": 40.0})
        v = self.judge()
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["problems"], ["health GEMM fp32 1.199 of ppb_gemm_bench's,"
                                                " beyond 5%"])

    def test_a_regression_on_the_clean_night_fails(self):
        junit(self.reads[1], [("1f1b x balanced P=2 M=4" + self.WORK, "pipebench.x",
                               "samples/s 100 -&gt; 80 (-20%)", "", "")])
        self.outcomes["nights-2"] = 1
        v = self.judge()
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["problems"], [
            "night 2: exit 1, expected 0",
            "night 2: regressions in 1f1b x balanced P=2 M=4" + self.WORK])

    def test_a_failed_check_is_named_apart_from_the_regressions(self):
        # ci/suite went on past the sweep's failed job, made the report and
        # exited 3; the report's JUnit fails the check's case.
        junit(self.reads[1], [("1f1b x balanced P=2 M=4" + self.WORK, "pipebench.x",
                               "--check failed: max relative error 0.030", "", ""),
                              ("zb-v x balanced P=2 M=4" + self.WORK, "pipebench.x", "", "", "")])
        self.outcomes["nights-2"] = 3
        v = self.judge()
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["night2"]["regressions"], [])
        self.assertEqual(v.values["problems"], [
            "night 2: exit 3, expected 0",
            "night 2: --check failed in 1f1b x balanced P=2 M=4"])
        # A regression of the same combination is still one.
        junit(self.reads[1], [("1f1b x balanced P=2 M=4" + self.WORK, "pipebench.x",
                               "--check failed: max relative error 0.030\nsamples/s 100 -&gt;"
                               " 80 (-20%)", "", "")])
        self.assertEqual(self.judge().values["night2"]["regressions"],
                         ["1f1b x balanced P=2 M=4" + self.WORK])

    def test_a_plant_not_caught_fails(self):
        self.planted([("1f1b x balanced P=2 M=4" + self.WORK + self.PLANT, "pipebench.x", "",
                       "undecidable: samples/s not judged: the host was busy", "")])
        self.outcomes["nights-planted"] = 0
        v = self.judge()
        self.assertEqual(v.status, "FAIL")
        self.assertEqual(v.values["problems"], [
            "planted: exit 0, expected 1",
            "planted: no regression naming stage 1 (1 undecidable: undecidable: samples/s not"
            " judged: the host was busy)"])
        # A regression of another stage is not the plant caught.
        self.planted([("1f1b x balanced P=2 M=4" + self.WORK + self.PLANT, "pipebench.x",
                       "stage 0 compute 0.10 -&gt; 0.12 (+20%)", "", "")])
        self.outcomes["nights-planted"] = 1
        self.assertEqual(self.judge().values["planted"]["caught"], [])

    def test_samples_refused_for_a_shared_gpu_pass_saying_why_and_memory_is_held_to_2pc(self):
        refused = "84 results: samples/s not predicted (peak memory is): 2 ranks shared one GPU"
        for r in self.validation["combinations"]:
            r["error"]["samples_per_second"] = None
        self.validation["refused"] = [refused]
        self.write("nights-validate.json", self.validation)
        v = self.judge()
        self.assertEqual(v.status, "PASS", v.figures)
        self.assertIn("samples/s not predicted: " + refused, v.figures)
        self.validation["combinations"][0]["error"]["peak_memory_bytes"] = 0.05
        self.write("nights-validate.json", self.validation)
        self.assertEqual(self.judge().values["problems"],
                         ["plan --validate: memory error 2.75% beyond 2%"])


if __name__ == "__main__":
    unittest.main()
