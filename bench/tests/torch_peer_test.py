#!/usr/bin/env python3
"""ci/torch_peer.py's logic without PyTorch: a result file read into the
shapes and step PyTorch must run (the presets from `pipebench list --json`
of this build, "gpt:" specs over gpt-small's), the runs it refuses (one line
naming the field, exit 2), pipebench's figures, pipebench over PyTorch and
the summary line, and the exit without torch (python3 -S: no site packages,
so no torch whatever this machine has installed).

usage: torch_peer_test.py PIPEBENCH   (the pipebench binary whose list it reads)
"""
import copy
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
import torch_peer as tp  # noqa: E402

H200 = ROOT / "reports" / "tests" / "data" / "h200"
PIPEBENCH = None
LIST = None


def one_rank(dtype="bf16", model="gpt-small"):
    """A real H200 gpt-small result (2 ranks) made into the one-rank run the
    peer compares with: one stage, M = 8, one device peak."""
    r = json.loads((H200 / "bubble-P2_1f1b__layer__P2_M4.json").read_text())
    r["config"].update(stages=1, microbatches=8, dtype=dtype, model=model, iters=6, warmup=2)
    r["metrics"]["samples_per_second"] = 70.2
    r["metrics"]["step_time_seconds"]["median"] = 32 / 70.2
    r["metrics"]["peak_memory_bytes"]["device_per_stage"] = [int(4.25 * 2**30)]
    return r


def models():
    return LIST["models"]


class Shapes(unittest.TestCase):
    def test_a_preset_is_the_lists_shapes_and_the_results_step(self):
        s = tp.shapes_of(one_rank(), models())
        self.assertEqual((s.layers, s.hidden, s.heads, s.seq, s.vocab, s.ffn, s.mbs),
                         (12, 768, 12, 1024, 50257, 4, 4))  # model.hpp's gpt-small
        self.assertEqual((s.dtype, s.microbatches, s.warmup, s.iters, s.seed), ("bf16", 8, 2, 6, 1))
        self.assertEqual(s.padded_vocab, 50257)  # a file from before padding: unpadded
        padded = one_rank()
        padded["config"]["vocab_padding"] = {"make_vocab_size_divisible_by": 128, "vocab": 50257,
                                             "padded_vocab": 50304}
        self.assertEqual(tp.shapes_of(padded, models()).padded_vocab, 50304)
        tiny = tp.shapes_of(one_rank(model="gpt-tiny"), models())
        self.assertEqual((tiny.layers, tiny.hidden, tiny.heads, tiny.seq, tiny.vocab),
                         (8, 128, 4, 64, 512))

    def test_a_spec_overrides_gpt_smalls_keys_and_the_result_its_micro_batch(self):
        r = one_rank(model="gpt:layers=2,seq=128,vocab=1000")
        r["config"]["micro_batch_size"] = 3
        s = tp.shapes_of(r, models())
        self.assertEqual((s.layers, s.hidden, s.seq, s.vocab, s.mbs), (2, 768, 128, 1000, 3))
        for bad in ("gpt:layer=2", "gpt:layers=0", "gpt:layers=x"):
            with self.assertRaisesRegex(tp.UsageError, "config.model: '%s'" % bad[4:]):
                tp.model_spec(bad, models())
        with self.assertRaisesRegex(tp.UsageError, "no preset 'gpt-huge' in the list"):
            tp.model_spec("gpt-huge", models())

    def test_runs_the_peer_cannot_stand_beside_are_refused_naming_the_field(self):
        real = json.loads((H200 / "bubble-P2_1f1b__layer__P2_M4.json").read_text())
        with self.assertRaisesRegex(tp.UsageError, r"^config.stages is 2"):
            tp.shapes_of(real, models())
        for field, value, msg in (("batches", 2, "config.batches is 2"),
                                  ("data_parallel", 2, "config.data_parallel is 2"),
                                  ("dtype", "fp16", "config.dtype 'fp16'")):
            r = one_rank()
            r["config"][field] = value
            with self.assertRaisesRegex(tp.UsageError, msg):
                tp.shapes_of(r, models())
        r = one_rank()
        r["status"] = "oom"
        with self.assertRaisesRegex(tp.UsageError, "status 'oom'"):
            tp.shapes_of(r, models())
        with self.assertRaisesRegex(tp.UsageError, "expected pipebench.result/1"):
            tp.shapes_of({"schema": "pipebench.gemm/1"}, models())


class Figures(unittest.TestCase):
    def setUp(self):
        self.r = one_rank()
        self.s = tp.shapes_of(self.r, models())
        self.pb = tp.pipebench_figures(self.r, self.s)

    def test_pipebenchs_side_is_read_from_the_result(self):
        self.assertEqual(self.pb["samples_per_second"], 70.2)
        self.assertAlmostEqual(self.pb["per_microbatch_seconds"], 32 / 70.2 / 8)
        self.assertEqual(self.pb["peak_device_bytes"], int(4.25 * 2**30))
        self.assertEqual(self.pb["device"], "NVIDIA H200")

    def test_samples_per_second_is_mbs_times_m_over_the_median_step(self):
        t = tp.timing([0.3, 0.1, 0.2], self.s)
        self.assertEqual(t["step_seconds"], 0.2)
        self.assertAlmostEqual(t["samples_per_second"], 4 * 8 / 0.2)
        self.assertAlmostEqual(t["per_microbatch_seconds"], 0.2 / 8)

    def test_the_ratios_and_the_summary_line(self):
        eager = dict(tp.timing([32 / 180.0], self.s), peak_allocated_bytes=int(5.1 * 2**30),
                     peak_reserved_bytes=6 * 2**30)
        doc = tp.document("r.json", self.s, "sdpa", self.pb, eager, torch_info={"version": "x"})
        self.assertEqual(doc["schema"], tp.SCHEMA)
        self.assertEqual(doc["status"], "ok")
        self.assertAlmostEqual(doc["ratios"]["samples_per_second"], 70.2 / 180.0)
        self.assertAlmostEqual(doc["ratios"]["peak_memory"], int(4.25 * 2**30) / int(5.1 * 2**30))
        self.assertIsNone(doc["ratios"]["per_microbatch_over_graph"])
        self.assertEqual(doc["summary"], "gpt-small bf16 M=8, sdpa attention: pipebench 70.2"
                         " samples/s, PyTorch 180.0 (0.39x); peak 4.25 GiB vs 5.10 GiB")
        graph = tp.timing([8 * 1.52e-3], self.s)
        doc = tp.document("r.json", self.s, "sdpa", self.pb, eager, graph)
        self.assertAlmostEqual(doc["ratios"]["per_microbatch_over_graph"],
                               self.pb["per_microbatch_seconds"] / 1.52e-3)
        self.assertIn("1.52 ms graph replay", doc["summary"])
        doc = tp.document("r.json", self.s, "sdpa", self.pb, eager, {"error": "operation not"
                                                                       " permitted"})
        self.assertIsNone(doc["ratios"]["per_microbatch_over_graph"])
        self.assertTrue(doc["summary"].endswith("; no CUDA graph replay: operation not permitted"))

    def test_which_of_sdpas_kernels_ran_and_the_top_kernels(self):
        # The kernel names PyTorch 2.x runs for sdpa on an H200.
        self.assertEqual(tp.sdpa_backend([
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1"]),
            "cudnn")
        self.assertEqual(tp.sdpa_backend([
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(...)"]),
            "flash")
        self.assertEqual(tp.sdpa_backend(["fmha_cutlassF_f32_aligned_64x64_rf_sm80(...)",
                                          "fmha_cutlassB_f32_aligned_64x64_k64_sm80(...)"]),
                         "efficient")
        # cuDNN's GEMMs are no attention; softmax and matmuls are the fallback.
        self.assertEqual(tp.sdpa_backend(["cudnn_generated_fort_native_gemm",
                                          "void at::native::cunn_SoftMaxForward<4>(...)"]), "math")
        top, total = tp.top_kernels([("gemm", 3.0), ("softmax", 1.0), ("gemm", 1.0),
                                     ("copy", 1.0)], n=2)
        self.assertEqual(total, 6.0)
        self.assertEqual(top, [{"name": "gemm", "seconds": 4.0, "share": 4.0 / 6.0},
                               {"name": "copy", "seconds": 1.0, "share": 1.0 / 6.0}])
        eager = dict(tp.timing([32 / 180.0], self.s), peak_allocated_bytes=int(5.1 * 2**30),
                     kernels={"sdpa": "cudnn", "step_kernel_seconds": 6.0, "top": top})
        doc = tp.document("r.json", self.s, "sdpa", self.pb, eager)
        self.assertIn(", sdpa (cudnn) attention: pipebench 70.2", doc["summary"])
        eager["kernels"] = {"error": "RuntimeError: CUPTI held"}
        doc = tp.document("r.json", self.s, "sdpa", self.pb, eager)
        self.assertIn(", sdpa attention: pipebench 70.2", doc["summary"])

    def test_a_skipped_document_says_why(self):
        doc = tp.document("r.json", self.s, "sdpa", self.pb, reason="no CUDA device")
        self.assertEqual((doc["status"], doc["ratios"]), ("skipped", None))
        self.assertEqual(doc["summary"], "torch peer: skipped: no CUDA device")


class Command(unittest.TestCase):
    def run_peer(self, *args, site=True):
        return subprocess.run([sys.executable] + ([] if site else ["-S"])
                              + [str(ROOT / "ci" / "torch_peer.py"), *args],
                              capture_output=True, text=True, timeout=60)

    def test_without_torch_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            result, lst = Path(tmp) / "r.json", Path(tmp) / "list.json"
            result.write_text(json.dumps(one_rank()))
            lst.write_text(json.dumps(LIST))
            p = self.run_peer(str(result), "--models", str(lst),
                              "--json", str(Path(tmp) / "o.json"), site=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertRegex(p.stderr, r"^torch_peer: no torch in this Python \(.*\)\n$")
            self.assertFalse((Path(tmp) / "o.json").exists())

    def test_bad_input_is_one_line_naming_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            lst = Path(tmp) / "list.json"
            lst.write_text(json.dumps(LIST))
            real = str(H200 / "bubble-P2_1f1b__layer__P2_M4.json")
            for args, msg in (
                    ((str(Path(tmp) / "none.json"), "--models", str(lst)),
                     "result .*none.json: cannot read"),
                    ((real, "--models", str(lst)), "config.stages is 2"),
                    ((real, "--models", str(lst), "--attention", "flash"),
                     "--attention: expected sdpa or naive, got 'flash'"),
                    ((real, "--models", str(lst), "--iters", "0"), "--iters: expected a whole"),
                    ((real,), "expected a result file and --models")):
                p = self.run_peer(*args)
                self.assertEqual(p.returncode, 2, (args, p.stderr))
                self.assertRegex(p.stderr, "^torch_peer: .*" + msg)
                self.assertEqual(p.stderr.count("\n"), 1, p.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: torch_peer_test.py PIPEBENCH")
    PIPEBENCH = sys.argv.pop(1)
    LIST = json.loads(subprocess.run([PIPEBENCH, "list", "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    unittest.main()
