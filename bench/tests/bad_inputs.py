#!/usr/bin/env python3
"""The bad-input corpus (bench/tests/data/bad_inputs.tsv) against the real binary.

Each case runs in a fresh temporary folder (its working directory) that
holds the same fixtures: keep.txt (a regular file), link -> keep.txt (a
symbolic link), fifo (a FIFO), adir/ (an empty folder). A case passes when
  * the exit code is the expected one,
  * stderr carries exactly one line from pipebench (under mpirun, Open MPI's
    own notice about the non-zero exit is not pipebench's and is set
    aside), and that line contains the expected fragment,
  * nothing crashed or aborted (no MPI_ABORT, no sanitizer or terminate
    report), and
  * the folder holds exactly what it held before: no partial or temporary
    file, every fixture of the same type and content (a FIFO, a device or a
    symbolic link given as an output is never replaced), /dev/null still a
    character device.

The TSV's columns: RANKS, EXIT CODE, FRAGMENT, COMMAND (the pipebench
arguments, split as a shell would). RANKS 1 runs the binary alone; more run
it under mpirun. In COMMAND:
  {data}              bench/tests/data
  {result:PATCH}      a result file: data/result_ok.json with the JSON merge
                      patch PATCH applied (RFC 7386: null removes a key);
                      a string "@raw:TEXT" is written as TEXT (1e400, NaN)
  {resultdir:PATCH}   a folder holding such a file
  {schedule:PATCH}    a schedule file: data/valid_gpipe.json patched
  {reference:PATCH}   a reference file: reports/reference/documents.json patched
  {text:CONTENT}      a file holding CONTENT (Python escapes: \\n, \\x7b)
  {tree:SPEC}         a folder treeN built from SPEC, a JSON object of
                      relative path -> content: an object is a result file
                      (data/result_ok.json patched by it), "@text:T" a file
                      holding T, "@dir" an empty folder, "@link:TARGET" a
                      symbolic link to TARGET ("@outside": a file outside
                      the case folder, "@outsidedir": an empty folder outside
                      it); expands to the folder's name, relative to the
                      case folder (its working directory)
  {outside}           the file outside the case folder
  {text.EXT:CONTENT}  like {text:...}, in a file named *.EXT ({text.csv:...})
Generated inputs are made before the folder is listed, so they are part of
"what it held before". Each case also gets a sibling temporary folder
holding outside.txt and odir/, reached only through links: it must hold
exactly what it held, with the same modification times (no write through
a link, not even of the same bytes).
COMMAND may begin with NAME=VALUE words, as a shell line may: the case runs
with those variables set (under mpirun, passed on with -x). A case that
sets a PPB_CUDAEMU_* variable runs on the CUDA emulator, whose library
folder --emulator names; without it (a build without the emulator) the case
is skipped, and says so.

usage: bad_inputs.py TSV PIPEBENCH MPIEXEC REFERENCE_JSON [-j JOBS] [-k REGEX]
                     [--emulator DIR]
"""
import argparse
import concurrent.futures
import copy
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("tsv")
ap.add_argument("pipebench")
ap.add_argument("mpiexec")
ap.add_argument("reference")
ap.add_argument("-j", "--jobs", type=int, default=2)
ap.add_argument("-k", "--keep", default="", help="run only cases whose command matches")
ap.add_argument("--emulator", default="", help="the CUDA emulator's library folder")
args = ap.parse_args()
args.pipebench = os.path.abspath(args.pipebench)
DATA = os.path.dirname(os.path.abspath(args.tsv))
# No GPU is visible to a case (CUDA_VISIBLE_DEVICES empty), so that a
# `--backend cuda` case is refused alike on a machine with GPUs.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1",
           CUDA_VISIBLE_DEVICES="")
CRASH = re.compile(r"MPI_ABORT|AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                   r"terminate called|Segmentation fault|core dumped|out of host memory")


def load(path):
    with open(path) as f:
        return json.load(f)


BASES = {
    "result": load(os.path.join(DATA, "result_ok.json")),
    "schedule": load(os.path.join(DATA, "valid_gpipe.json")),
    "reference": load(args.reference),
}


def merge(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def dump(doc):
    text = json.dumps(doc, indent=1)
    return re.sub(r'"@raw:([^"]*)"', lambda m: m.group(1), text)


def build_tree(root, spec, outside):
    """Makes the folder `root` from a {tree:SPEC} (see the docstring)."""
    os.mkdir(root)
    for rel, content in spec.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, dict):
            with open(path, "w") as f:
                f.write(dump(merge(BASES["result"], content)))
        elif content == "@dir":
            os.makedirs(path, exist_ok=True)
        elif content.startswith("@link:"):
            target = content[len("@link:"):]
            target = {"@outside": os.path.join(outside, "outside.txt"),
                      "@outsidedir": os.path.join(outside, "odir")}.get(target, target)
            os.symlink(target, path)
        elif content.startswith("@text:"):
            with open(path, "w") as f:
                f.write(content[len("@text:"):])
        else:
            raise SystemExit(f"tree: {rel}: unknown content {content!r}")


def expand(command, folder, outside):
    """Replaces the {kind:...} placeholders (brace-balanced) with paths."""
    out, i, n = [], 0, 0
    while True:
        j = command.find("{", i)
        if j < 0:
            out.append(command[i:])
            return "".join(out)
        out.append(command[i:j])
        depth, k = 0, j
        while True:
            depth += {"{": 1, "}": -1}.get(command[k], 0)
            if depth == 0:
                break
            k += 1
        token = command[j + 1:k]
        kind, _, body = token.partition(":")
        n += 1
        if kind == "data":
            out.append(DATA)
        elif kind == "outside":
            out.append(os.path.join(outside, "outside.txt"))
        elif kind == "tree":
            build_tree(os.path.join(folder, f"tree{n}"), json.loads(body), outside)
            out.append(f"tree{n}")
        elif kind in ("result", "resultdir", "schedule", "reference"):
            base = BASES["result" if kind == "resultdir" else kind]
            doc = merge(base, json.loads(body))
            where = folder
            if kind == "resultdir":
                where = os.path.join(folder, f"results{n}")
                os.mkdir(where)
            path = os.path.join(where, f"{kind}{n}.json")
            with open(path, "w") as f:
                f.write(dump(doc))
            out.append(where if kind == "resultdir" else path)
        elif kind == "text" or kind.startswith("text."):
            path = os.path.join(folder, f"text{n}.{kind[5:] or 'txt'}")
            with open(path, "wb") as f:
                f.write(body.encode().decode("unicode_escape").encode("latin-1"))
            out.append(path)
        else:
            raise SystemExit(f"unknown placeholder {{{kind}:...}} in: {command}")
        i = k + 1


def snapshot(folder, mtimes=False):
    """(relative path, type, content or link target[, mtime]) of everything in folder."""
    items = []
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, folder)
            if stat.S_ISLNK(st.st_mode):
                items.append((rel, "link", os.readlink(p)))
            elif stat.S_ISFIFO(st.st_mode):
                items.append((rel, "fifo", ""))
            elif stat.S_ISDIR(st.st_mode):
                items.append((rel, "dir", ""))
            else:
                with open(p, "rb") as f:
                    items.append((rel, "file", f.read()) + ((st.st_mtime_ns,) if mtimes else ()))
    return sorted(items)


def run_case(case):
    line_no, ranks, code, fragment, command = case
    with tempfile.TemporaryDirectory(prefix="ppb-bad-") as folder, \
            tempfile.TemporaryDirectory(prefix="ppb-outside-") as outside:
        with open(os.path.join(outside, "outside.txt"), "w") as f:
            f.write("outside\n")
        os.mkdir(os.path.join(outside, "odir"))
        with open(os.path.join(folder, "keep.txt"), "w") as f:
            f.write("keep\n")
        os.symlink("keep.txt", os.path.join(folder, "link"))
        os.mkfifo(os.path.join(folder, "fifo"))
        os.mkdir(os.path.join(folder, "adir"))
        words = shlex.split(expand(command, folder, outside))
        env, names = dict(ENV), []
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
            names.append(name)
        if any(name.startswith("PPB_CUDAEMU_") for name in names):
            if not args.emulator:
                return line_no, command, None, "", 0.0
            env["LD_LIBRARY_PATH"] = args.emulator
            names.append("LD_LIBRARY_PATH")
        argv = [args.pipebench] + words
        if ranks > 1:
            argv = [args.mpiexec, "-np", str(ranks)] + [w for n in names for w in ("-x", n)] + argv
        before, outside_before = snapshot(folder), snapshot(outside, mtimes=True)
        start = time.monotonic()
        try:
            p = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL, errors="backslashreplace")
            got, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            got, out, err = "timeout (30 s)", "", ""
        took = time.monotonic() - start
        after, outside_after = snapshot(folder), snapshot(outside, mtimes=True)
    problems = []
    if got != code:
        problems.append(f"exit {got}, want {code}")
    lines = err.splitlines()
    if ranks > 1:
        lines = [l for l in lines if l.startswith("pipebench")]
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines of error, want 1")
    elif fragment not in lines[0]:
        problems.append(f"the error does not contain '{fragment}'")
    if CRASH.search(err):
        problems.append("a crash or abort report")
    if before != after:
        old, new = set(before), set(after)
        problems.append(f"the folder changed: new {sorted(x[0] for x in new - old)}, "
                        f"gone or changed {sorted(x[0] for x in old - new)}")
    if outside_before != outside_after:
        problems.append("the folder outside the case changed (written through a link)")
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        problems.append("/dev/null is no longer a character device")
    return line_no, command, problems, err, took


cases = []
with open(args.tsv) as f:
    for no, raw in enumerate(f, 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        cols = raw.rstrip("\n").split("\t")
        if len(cols) != 4:
            raise SystemExit(f"{args.tsv}:{no}: want 4 tab-separated columns, got {len(cols)}")
        if args.keep and not re.search(args.keep, cols[3]):
            continue
        cases.append((no, int(cols[0]), int(cols[1]), cols[2], cols[3]))

start = time.monotonic()
failed = 0
with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
    for no, command, problems, err, took in pool.map(run_case, cases):
        if problems is None:
            print(f"skip {no:4d} (no CUDA emulator in this build): {command}"[:160])
        elif problems:
            failed += 1
            print(f"FAIL {os.path.basename(args.tsv)}:{no}: pipebench {command}\n  " +
                  "\n  ".join(problems) + "\n  stderr: " + err.strip().replace("\n", "\n          "))
        else:
            print(f"ok   {no:4d} {took:5.2f}s {err.strip().splitlines()[-1] if err.strip() else ''}"
                  [:160])
print(f"{len(cases) - failed}/{len(cases)} cases passed in {time.monotonic() - start:.1f} s")
sys.exit(1 if failed else 0)
