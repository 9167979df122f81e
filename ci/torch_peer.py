#!/usr/bin/env python3
"""PyTorch eager on exactly the shapes and step of one pipebench result.

usage: torch_peer.py RESULT --models LIST [--json FILE] [--attention sdpa|naive]
                     [--graph] [--warmup W] [--iters N]

RESULT is one `pipebench run` result file (schema pipebench.result/1) of
one rank (one stage, no replicas, --batches 1, status ok); LIST is
`pipebench list --json` of the same build, whose "models" entries give the
presets' shapes ("gpt:key=value,..." specs override gpt-small's, as
parse_model_spec does). The peer is the model pipebench computes
(pipeline/include/ppb/pipeline/model.hpp): token + position embedding,
pre-LN GPT-2 blocks (causal attention, tanh GeLU), a final LayerNorm, an
untied head without bias, cross-entropy averaged over the tokens; the
embedding and head hold the result's padded vocabulary
(config.vocab_padding.padded_vocab, --make-vocab-size-divisible-by; the true
one in files without it), the loss
is over the true vocabulary's logits and the tokens are drawn from it. One step
is pipebench's: M micro-batches of the result's micro-batch size, forward
and backward each (the loss scaled by 1/M, gradients accumulated), then
one SGD update. bf16: autocast to bf16 over fp32 weights; fp32: fp32
weights and activations, with TF32 off for cuBLAS's matmuls. Attention:
torch.nn.functional.scaled_dot_product_attention (sdpa, the default) or the
textbook softmax(QK^T/sqrt(d))V (naive). In fp32, sdpa's one fused
kernel is the memory-efficient one, whose products are 3xTF32 on the
tensor cores (CUTLASS's OpMultiplyAddFastF32: near-fp32 accuracy) whatever
allow_tf32 says; pipebench's fp32 fused attention is 3xTF32 too, so the
two stand like for like.
The result's --warmup and --iters steps unless given; each timed step is
timed with CUDA events; samples/s = micro-batch size x M / median step
time (docs/metrics.md); the peaks are torch.cuda.max_memory_allocated and
max_memory_reserved over the timed steps. One more step runs under
torch.profiler: PyTorch's top kernels by device time (kernels only; the
copies' and memsets' device time is a figure of its own), and which of
sdpa's backends ran (cuDNN's, its flash, the memory-efficient one, or the
math fallback: "pytorch.kernels"), from the profiled ops, else from the
kernels' names. --graph also captures the whole step once in a CUDA graph
and replays it (for launch-bound models).

Writes a JSON document (schema pipebench.torch-peer/1, to FILE or stdout)
with both sides' figures and pipebench over PyTorch, and prints a one-line
summary. Exit 0 when measured (a step that cannot be warmed up for or
captured in a CUDA graph keeps the eager figures and leaves "graph":
{"error": why}); 1 when PyTorch fails (one line: out
of memory, ...); 2 on bad input or without torch (one line naming what is
wrong); 3 when torch has no CUDA device (the document says "status":
"skipped" and why).
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

SCHEMA = "pipebench.torch-peer/1"
RESULT_SCHEMA = "pipebench.result/1"
EXIT_SKIPPED = 3
SPEC_KEYS = ("layers", "hidden", "heads", "seq", "vocab", "ffn", "mbs")
SPEC_BASE = "gpt-small"  # what a "gpt:..." spec's omitted keys take


class UsageError(Exception):
    """Bad input: one line, exit 2."""


@dataclasses.dataclass(frozen=True)
class Shapes:
    """The model and step one result ran: the list's field names."""
    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    padded_vocab: int  # rows of the embedding and the head (>= vocab)
    ffn: int
    mbs: int
    dtype: str
    microbatches: int
    warmup: int
    iters: int
    seed: int


def read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"{what} {path}: not JSON: {e}") from None


def model_spec(text, models):
    """The shapes of a --model value: a preset of `models` (list --json's
    "models") or "gpt:key=value,..." over gpt-small's. UsageError naming
    the preset or key that is wrong."""
    presets = {m["name"]: {k: m[k] for k in SPEC_KEYS} for m in models}
    if not text.startswith("gpt:"):
        if text not in presets:
            raise UsageError(f"config.model: no preset '{text}' in the list"
                             f" (it has {', '.join(presets) or 'none'})")
        return presets[text]
    if SPEC_BASE not in presets:
        raise UsageError(f"the list has no {SPEC_BASE} preset for the spec '{text}'")
    spec = dict(presets[SPEC_BASE])
    for item in filter(None, text[4:].split(",")):
        key, _, value = item.partition("=")
        if key not in SPEC_KEYS or not value.isdigit() or int(value) < 1:
            raise UsageError(f"config.model: '{item}' in '{text}' is not key=positive integer"
                             f" with key one of {', '.join(SPEC_KEYS)}")
        spec[key] = int(value)
    return spec


def shapes_of(result, models):
    """The Shapes of a result document; UsageError naming the field that
    makes it no one-rank run PyTorch can stand beside."""
    if not isinstance(result, dict) or result.get("schema") != RESULT_SCHEMA:
        raise UsageError(f"schema {result.get('schema') if isinstance(result, dict) else None!r},"
                         f" expected {RESULT_SCHEMA}")
    if result.get("status") != "ok":
        raise UsageError(f"status '{result.get('status')}': only an ok run has figures to compare")
    c = result["config"]
    for field, want in (("stages", 1), ("data_parallel", 1), ("batches", 1)):
        if c.get(field, 1) != want:
            raise UsageError(f"config.{field} is {c.get(field)}: the peer is one GPU running"
                             f" one batch a step ({field} {want})")
    spec = model_spec(c["model"], models)
    spec["mbs"] = c.get("micro_batch_size", spec["mbs"])
    if spec["hidden"] % spec["heads"]:
        raise UsageError(f"config.model: hidden {spec['hidden']} is not divisible by heads"
                         f" {spec['heads']}")
    if c.get("dtype", "fp32") not in ("fp32", "bf16"):
        raise UsageError(f"config.dtype '{c.get('dtype')}': expected fp32 or bf16")
    # Files from before padding ran unpadded (no config.vocab_padding).
    padded = max(c.get("vocab_padding", {}).get("padded_vocab", 0), spec["vocab"])
    return Shapes(name=c["model"], dtype=c.get("dtype", "fp32"), microbatches=c["microbatches"],
                  warmup=c["warmup"], iters=c["iters"], seed=c.get("seed", 1),
                  padded_vocab=padded, **spec)


def pipebench_figures(result, shapes):
    """pipebench's side: samples/s, the median step, per micro-batch and the
    device peak (device_per_stage; None on a backend without one)."""
    m = result["metrics"]
    median = m["step_time_seconds"]["median"]
    device = (m.get("peak_memory_bytes") or {}).get("device_per_stage") or []
    return {"samples_per_second": m["samples_per_second"], "step_seconds": median,
            "per_microbatch_seconds": median / shapes.microbatches,
            "peak_device_bytes": max(device) if device else None,
            "backend": result["config"].get("backend"),
            "device": ((result.get("environment") or {}).get("gpus") or [None])[0]}


def ratio(a, b):
    return a / b if a is not None and b else None


# The op scaled_dot_product_attention dispatches to, per backend (PyTorch
# 2.11), as the profiler names it on the host: the forward's and, but for
# the math fallback (autograd through its matmuls and softmax), the
# backward's. The first source of which backend ran: the op names it
# whatever kernels the backend then launches.
SDPA_OPS = {"aten::_scaled_dot_product_cudnn_attention": "cudnn",
            "aten::_scaled_dot_product_cudnn_attention_backward": "cudnn",
            "aten::_scaled_dot_product_flash_attention": "flash",
            "aten::_scaled_dot_product_flash_attention_backward": "flash",
            "aten::_scaled_dot_product_efficient_attention": "efficient",
            "aten::_scaled_dot_product_efficient_attention_backward": "efficient",
            "aten::_scaled_dot_product_attention_math": "math"}
SDPA_ORDER = ("cudnn", "flash", "efficient", "math")

# The fallback where the profile holds no such op: PyTorch's fused
# attentions by their kernels' names (PyTorch 2.x): cuDNN's
# ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_..."), its own
# FlashAttention-2 ("pytorch_flash::flash_fwd_kernel<...>"), the
# memory-efficient one of xFormers ("fmha_cutlassF_f32_aligned_64x64_...",
# PyTorch's fp32 path). None of them: the math fallback (matmuls and a
# softmax). These marks can miss a kernel of a backend (a cuDNN engine
# whose name has no "_sdpa_"), which then reads as the math fallback.
# Per backend, its kernel names' marks: a name holding every part of one.
SDPA_BACKENDS = (("cudnn", (("cudnn_generated", "_sdpa_"),)),
                 ("flash", (("flash_fwd",), ("flash_bwd",))),
                 ("efficient", (("fmha_cutlass",), ("attentionkernel",), ("efficient_attention",))))


def sdpa_backend_of_ops(ops):
    """The backend scaled_dot_product_attention dispatched to, from the
    names of the host's ops of one step (SDPA_OPS); the first of
    SDPA_ORDER where the step ran several; None where it ran none."""
    ran = {SDPA_OPS[n] for n in ops if n in SDPA_OPS}
    return next((b for b in SDPA_ORDER if b in ran), None)


def sdpa_backend(names, ops=()):
    """Which of scaled_dot_product_attention's backends ran in one step:
    "cudnn", "flash", "efficient" or "math". From the host's op names
    `ops` where one of SDPA_OPS is among them; else from the names of the
    step's kernels, "math" where none of the fused ones' marks is found."""
    backend = sdpa_backend_of_ops(ops)
    if backend:
        return backend
    lowered = [n.lower() for n in names]
    for backend, marks in SDPA_BACKENDS:
        if any(all(part in n for part in mark) for mark in marks for n in lowered):
            return backend
    return "math"


def top_kernels(kernels, n=8):
    """The `n` kernels (by name) that took the most of one step's kernel
    time, from (name, seconds) per launch: [{"name", "seconds", "share"}]
    with share of all the step's kernel seconds, and that total."""
    per = {}
    for name, seconds in kernels:
        per[name] = per.get(name, 0.0) + seconds
    total = sum(per.values())
    ranked = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [{"name": k, "seconds": v, "share": v / total if total > 0 else None}
            for k, v in ranked], total


# The device's events that are no kernel: CUPTI's copies and memsets, as
# PyTorch's profiler (Kineto) names them: "Memcpy HtoD (Pageable ->
# Device)", "Memset (Device)". A kernel's name is a C++ name, never one of
# these.
NOT_KERNELS = ("Memcpy ", "Memset ")


def device_kind(e):
    """"CPU" or "CUDA" for a profiler event (its device_type, an enum whose
    str is "DeviceType.CUDA"), else ""."""
    kind = str(getattr(e, "device_type", ""))
    return next((k for k in ("CUDA", "CPU") if kind.endswith(k)), "")


def profile_figures(events, attention):
    """One profiled step's figures from its events (torch.profiler's
    FunctionEvent: name, device_type, time_range, is_user_annotation).
    The kernel figures count kernels only, so that the top kernels' shares
    are of kernel time and the total is what its name says: the device's
    copies and memsets are summed apart (step_copy_seconds), and the
    ranges record_function marks on the device's timeline (the optimizer
    step's) are left out, since they span kernels. For sdpa, which of its
    backends ran (sdpa_backend: the host's ops first). {"error": why}
    where the step shows no kernel."""
    kernels, copies, ops = [], 0.0, []
    for e in events:
        kind = device_kind(e)
        if kind == "CPU":
            ops.append(e.name)
        elif kind == "CUDA" and not getattr(e, "is_user_annotation", False):
            seconds = e.time_range.elapsed_us() * 1e-6
            if e.name.startswith(NOT_KERNELS):
                copies += seconds
            else:
                kernels.append((e.name, seconds))
    if not kernels:
        return {"error": "the profiler recorded no kernels"}
    top, total = top_kernels(kernels)
    sdpa = sdpa_from = None
    if attention == "sdpa":
        sdpa = sdpa_backend([name for name, _ in kernels], ops)
        sdpa_from = "ops" if sdpa_backend_of_ops(ops) else "kernel names"
    return {"sdpa": sdpa, "sdpa_from": sdpa_from, "step_kernel_seconds": total,
            "step_copy_seconds": copies, "top": top}


def first_line(e):
    """An exception in one line: its type and its message's first line."""
    return "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or ["?"])[0][:200])


def graph_error(e):
    """{"error": why} for a step that could not be warmed up for or
    captured in a CUDA graph. torch.cuda.graph ends the capture on the way
    out whatever happened inside: where an op failed, capture_end's own
    error ("operation failed due to a previous error during capture",
    capture invalidated) is the one raised and the op's is its
    __context__. "error" is the op's where there is one, and "raised" the
    one that reached us when it is another. Only a capture's own error (its
    message speaks of the capture: "during capture", "capturing", "capture
    was ended with unjoined work") hands over to its context: any other
    error is the reason itself, even when it was raised while handling
    something else."""
    capture_failed = "captur" in str(e).lower()
    cause = e.__context__ if capture_failed and e.__context__ is not None else e
    out = {"error": first_line(cause)}
    if cause is not e:
        out["raised"] = first_line(e)
    return out


def compare(pb, eager, graph):
    """pipebench over PyTorch: samples/s (above 1: pipebench faster), the
    peak (below 1: pipebench smaller) against max_memory_allocated, and
    per micro-batch against the graph replay (above 1: pipebench slower)."""
    return {"samples_per_second": ratio(pb["samples_per_second"], eager["samples_per_second"]),
            "peak_memory": ratio(pb["peak_device_bytes"], eager["peak_allocated_bytes"]),
            "per_microbatch_over_graph":
                ratio(pb["per_microbatch_seconds"], graph["per_microbatch_seconds"])
                if graph and "error" not in graph else None}


def gib(n):
    return "%.2f GiB" % (n / 2**30) if n is not None else "?"


def summary_line(doc):
    """One line for people: the model, dtype, both samples/s and their
    ratio, both peaks, and the graph replay where there is one. In fp32
    it says how PyTorch multiplied: cuBLAS's matmuls without TF32, and
    sdpa's memory-efficient kernel in 3xTF32 where that one ran."""
    if doc.get("status") != "ok":
        return f"torch peer: skipped: {doc.get('reason')}"
    s, pb, pt, r = doc["model"], doc["pipebench"], doc["pytorch"], doc["ratios"]
    attention = doc["attention"]
    sdpa = (pt.get("kernels") or {}).get("sdpa") if attention == "sdpa" else None
    if sdpa:
        attention += " (%s%s)" % (sdpa, ", 3xTF32" if s["dtype"] == "fp32"
                                  and sdpa == "efficient" else "")
    dtype = s["dtype"] + (" (matmuls TF32 off)" if s["dtype"] == "fp32" else "")
    line = ("%s %s M=%d, %s attention: pipebench %.1f samples/s, PyTorch %.1f (%.2fx);"
            " peak %s vs %s" % (s["name"], dtype, s["microbatches"], attention,
                                pb["samples_per_second"], pt["samples_per_second"],
                                r["samples_per_second"], gib(pb["peak_device_bytes"]),
                                gib(pt["peak_allocated_bytes"])))
    if doc.get("graph") and "error" in doc["graph"]:
        line += "; no CUDA graph replay: " + doc["graph"]["error"]
    elif doc.get("graph"):
        line += "; per micro-batch %.2f ms vs %.2f ms eager, %.2f ms graph replay (%.2fx)" % (
            pb["per_microbatch_seconds"] * 1e3, pt["per_microbatch_seconds"] * 1e3,
            doc["graph"]["per_microbatch_seconds"] * 1e3, r["per_microbatch_over_graph"])
    return line


def document(result_path, shapes, attention, pb, eager=None, graph=None, torch_info=None,
             reason=""):
    """The pipebench.torch-peer/1 document: "ok" with the figures, or
    "skipped" with the reason."""
    doc = {"schema": SCHEMA, "status": "ok" if eager else "skipped", "reason": reason,
           "result": str(result_path), "model": dataclasses.asdict(shapes),
           "attention": attention, "torch": torch_info, "pipebench": pb, "pytorch": eager,
           "graph": graph, "ratios": compare(pb, eager, graph) if eager else None}
    doc["summary"] = summary_line(doc)
    return doc


def timing(seconds, shapes):
    median = statistics.median(seconds)
    return {"step_seconds": median, "step_seconds_samples": seconds,
            "samples_per_second": shapes.mbs * shapes.microbatches / median,
            "per_microbatch_seconds": median / shapes.microbatches}


# --- PyTorch (imported only here) ---------------------------------------------------


def build_model(torch, s, attention):
    """The GPT of model.hpp in torch.nn, on the GPU, fp32 weights."""
    nn, F = torch.nn, torch.nn.functional
    d = s.hidden // s.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(s.hidden), nn.LayerNorm(s.hidden)
            self.qkv = nn.Linear(s.hidden, 3 * s.hidden)
            self.proj = nn.Linear(s.hidden, s.hidden)
            self.fc1 = nn.Linear(s.hidden, s.ffn * s.hidden)
            self.fc2 = nn.Linear(s.ffn * s.hidden, s.hidden)
            if attention == "naive":
                self.register_buffer("mask", torch.ones(s.seq, s.seq, dtype=torch.bool).triu(1),
                                     persistent=False)

        def forward(self, x):
            b, t, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, s.heads, d).permute(2, 0, 3, 1, 4)
            if attention == "sdpa":
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
                a = torch.softmax(scores.masked_fill(self.mask, float("-inf")), dim=-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(s.padded_vocab, s.hidden)
            self.pos = nn.Embedding(s.seq, s.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(s.layers))
            self.norm = nn.LayerNorm(s.hidden)
            self.head = nn.Linear(s.hidden, s.padded_vocab, bias=False)  # untied

        def forward(self, ids, labels):
            x = self.tok(ids) + self.pos.weight
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.norm(x))
            # The padded logits are no token: the loss is over the true vocabulary's.
            logits = logits.view(-1, s.padded_vocab)[:, :s.vocab]
            return F.cross_entropy(logits.float(), labels.view(-1))

    return Gpt().cuda()


def make_step(torch, s, model, opt, data, cache):
    """pipebench's step: every micro-batch forward and backward (loss / M,
    gradients accumulated), then one SGD update. `cache`: autocast's weight
    cast cache (off inside a CUDA graph capture, as PyTorch requires)."""
    bf16 = s.dtype == "bf16"

    def step():
        for ids, labels in data:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16, cache_enabled=cache):
                loss = model(ids, labels)
            (loss / s.microbatches).backward()
        opt.step()

    return step


def timed_steps(torch, step, after, warmup, iters):
    """`iters` steps after `warmup` ones, each between two CUDA events;
    `after` runs between steps, outside the timed window."""
    for _ in range(warmup):
        step()
        after()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
        after()
    return seconds


def kernel_breakdown(torch, step, after, attention):
    """One more step under torch.profiler (the host's ops and the
    device's events): profile_figures. {"error": why} where the profiler
    cannot run or gives no kernels; the timed figures stand either way."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        after()
        return profile_figures(prof.events(), attention)
    except Exception as e:  # noqa: BLE001 - a profiler that cannot run here: no breakdown
        return {"error": first_line(e)}


def measure(torch, s, attention, graph):
    """(eager figures, graph figures or None) on the current CUDA device;
    the graph's figures are {"error": why} (graph_error) where the step
    cannot be warmed up for or captured in a graph."""
    # cuBLAS's fp32 matmuls in IEEE fp32 (bf16's are unaffected). sdpa's
    # fp32 attention is 3xTF32 whatever these say (the module's docstring).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(s.seed)
    model = build_model(torch, s, attention)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    data = [(torch.randint(0, s.vocab, (s.mbs, s.seq), device="cuda"),
             torch.randint(0, s.vocab, (s.mbs, s.seq), device="cuda"))
            for _ in range(s.microbatches)]
    step = make_step(torch, s, model, opt, data, cache=True)
    zero = lambda: opt.zero_grad(set_to_none=True)  # noqa: E731
    seconds = timed_steps(torch, step, zero, max(s.warmup, 1), s.iters)
    eager = timing(seconds, s)
    eager["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    eager["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    eager["kernels"] = kernel_breakdown(torch, step, zero, attention)
    if not graph:
        return eager, None
    # Whole-step capture (PyTorch's "whole network capture"): warmed up on a
    # side stream and captured on the same one, gradients None before
    # capture so that every replay's first backward writes them and the
    # rest accumulate, as in eager. A failure in the warm-up or the capture
    # (an op that cannot be captured, memory) leaves the eager figures.
    captured = make_step(torch, s, model, opt, data, cache=False)
    g = torch.cuda.CUDAGraph()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                captured()
                zero()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g, stream=side):
            captured()
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError among them
        return eager, graph_error(e)
    replay = timed_steps(torch, g.replay, lambda: None, max(s.warmup, 1), s.iters)
    return eager, timing(replay, s)


def parse_args(argv):
    args = {"json": None, "attention": "sdpa", "graph": False, "warmup": None, "iters": None,
            "models": None, "result": None}
    it = iter(argv)
    for a in it:
        if a in ("--json", "--attention", "--warmup", "--iters", "--models"):
            value = next(it, None)
            if value is None:
                raise UsageError(f"{a}: expected a value")
            args[a[2:]] = value
        elif a == "--graph":
            args["graph"] = True
        elif a.startswith("-") or args["result"]:
            raise UsageError(f"unknown argument '{a}' (usage: torch_peer.py RESULT --models LIST"
                             " [--json FILE] [--attention sdpa|naive] [--graph] [--warmup W]"
                             " [--iters N])")
        else:
            args["result"] = a
    if not args["result"] or not args["models"]:
        raise UsageError("expected a result file and --models LIST (pipebench list --json)")
    if args["attention"] not in ("sdpa", "naive"):
        raise UsageError(f"--attention: expected sdpa or naive, got '{args['attention']}'")
    for k in ("warmup", "iters"):
        if args[k] is not None:
            least = 1 if k == "iters" else 0
            if not args[k].isdigit() or int(args[k]) < least:
                raise UsageError(f"--{k}: expected a whole number >= {least}, got '{args[k]}'")
            args[k] = int(args[k])
    return args


def write(doc, path):
    text = json.dumps(doc, indent=1) + "\n"
    if path:
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    else:
        sys.stdout.write(text)


def main(argv):
    try:
        a = parse_args(argv[1:])
        result = read_json(a["result"], "result")
        listing = read_json(a["models"], "--models")
        if not isinstance(listing, dict) or not listing.get("models"):
            raise UsageError(f"--models {a['models']}: no \"models\" (pipebench list --json)")
        try:
            s = shapes_of(result, listing["models"])
            s = dataclasses.replace(s, **{k: a[k] for k in ("warmup", "iters") if a[k] is not None})
            pb = pipebench_figures(result, s)
        except (KeyError, TypeError) as e:
            raise UsageError(f"result {a['result']}: no field {e} where a pipebench.result/1"
                             " has one") from None
    except UsageError as e:
        print(f"torch_peer: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"torch_peer: no torch in this Python ({sys.executable}: {e})", file=sys.stderr)
        return 2
    info = {"version": torch.__version__, "cuda": torch.version.cuda}
    if not torch.cuda.is_available():
        doc = document(a["result"], s, a["attention"], pb, torch_info=info,
                       reason=f"torch {torch.__version__} sees no CUDA device")
        write(doc, a["json"])
        print(doc["summary"])
        return EXIT_SKIPPED
    info["device"] = torch.cuda.get_device_name()
    try:
        eager, graph = measure(torch, s, a["attention"], a["graph"])
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError among them
        print(f"torch_peer: PyTorch failed: {type(e).__name__}: "
              + (str(e).strip().splitlines() or ["?"])[0][:200], file=sys.stderr)
        return 1
    doc = document(a["result"], s, a["attention"], pb, eager, graph, info)
    write(doc, a["json"])
    print(doc["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
