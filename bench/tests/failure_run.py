#!/usr/bin/env python3
"""One rank fails, the whole job ends: real 2-rank runs of `pipebench run`
(timed backend, three combinations) with a failure planted in the last
combination by the hidden --debug-fault flag, or a full disk.

kill-setup     rank 1 SIGKILLs itself before the schedule and partition
kill-measure   rank 1 SIGKILLs itself before the timed steps
kill-write     rank 0 SIGKILLs itself as it writes the result
throw-measure  rank 1 throws before the timed steps (a backend error)
kill-trace     a sweep with --trace run again into its folder; rank 0 SIGKILLs
               itself between the last combination's new traces and its
               result: the old result is gone (never an old result beside
               new traces), and --resume runs that combination again
interrupt      Ctrl-C (SIGINT to mpiexec) after the first combination: rank 0
               says so in one line, naming the folder and --resume
suspend        the whole job held (SIGSTOP to both ranks) for 4 s under
               --timeout 2, then continued: it runs to its end (exit 0)
stop-setup     rank 1 stops itself (SIGSTOP) before its partition; --timeout 2
stop-measure   rank 1 stops itself before the timed steps; --timeout 2
stop-write     rank 0 stops itself as it writes the result; --timeout 2
disk-full      --out on a 96 KiB tmpfs (mounted here; skipped, exit 77, where
               mounting is not allowed): rank 0 cannot write a result

Each must end the job within 10 s of the failure (the sweep before it takes
a second or two; the bound is generous: this tests hangs, not speed), exit
non-zero, name the rank on stderr, and leave the results written before
the failure intact (each parses as a complete result, with status ok) and
no other file (no half result, no temporary file).

usage: failure_run.py MODE PIPEBENCH MPIEXEC WORKDIR
"""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

mode, pb, mpiexec, work = sys.argv[1:5]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
# Three combinations; the fault sits in the last one.
SWEEP = ["--backend", "timed", "--partition", "layer", "--microbatches", "4", "-n", "2", "-w", "0"]
SCHEDULES = "1f1b,gpipe,zb-h1"
LIMIT = 10.0  # seconds from the failure to the end of the job
SWEEP_ALLOWANCE = 20.0  # the two combinations before it, on a loaded 2-core host

FAULTS = {
    "kill-setup": ("1:setup:kill", 0, r"rank 1 .*(signal 9|Killed)"),
    "kill-measure": ("1:measure:kill", 0, r"rank 1 .*(signal 9|Killed)"),
    "kill-write": ("0:write:kill", 0, r"rank 0 .*(signal 9|Killed)"),
    "throw-measure": ("1:measure:throw", 0,
                      r"pipebench\[r1\]: error on rank 1 of 2: planted failure"),
    "stop-setup": ("1:setup:stop", 2,
                   r"pipebench\[r0\]: rank 0: stuck for [0-9.]+ s starting the backend"),
    "stop-measure": ("1:measure:stop", 2,
                     r"pipebench\[r0\]: rank 0: stuck for [0-9.]+ s starting the timed steps"),
    "stop-write": ("0:write:stop", 2,
                   r"pipebench\[r1\]: rank 1: stuck for [0-9.]+ s .*waiting for rank 0"),
}


def fail(why, output=""):
    sys.exit(f"FAIL ({mode}): {why}\n--- output ---\n{output}")


def run(out, extra, schedules=SCHEDULES):
    args = [mpiexec, "-np", "2", pb, "run", *SWEEP, "--schedule", schedules, "--out", out, *extra]
    start = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=env,
                           timeout=LIMIT + SWEEP_ALLOWANCE + 30)
    except subprocess.TimeoutExpired as e:
        fail(f"the job did not end ({time.monotonic() - start:.0f} s): a hang",
             (e.stdout or b"").decode() + (e.stderr or b"").decode())
    took = time.monotonic() - start
    print(" ".join(args))
    print(p.stdout + p.stderr)
    print(f"--- exit {p.returncode} after {took:.1f} s")
    return p.returncode, p.stdout + p.stderr, took


def check_files(out, want_results):
    """Every file is a complete result with status ok; nothing else is there.
    want_results: the counts allowed (a stopped rank 0 is continued by
    mpirun's abort before it is killed, and may finish its file)."""
    names = sorted(os.listdir(out))
    results = [n for n in names if n.endswith(".json") and not n.startswith(".")]
    others = [n for n in names if n not in results]
    if others:
        fail(f"left behind in {out}: {others}")
    for n in results:
        with open(os.path.join(out, n)) as f:
            try:
                doc = json.load(f)
            except ValueError as e:
                fail(f"{n} is not a complete JSON document: {e}")
        if doc.get("schema") != "pipebench.result/1" or doc.get("status") != "ok":
            fail(f"{n}: not an ok result: schema {doc.get('schema')}, status {doc.get('status')}")
    if len(results) not in want_results:
        fail(f"{len(results)} result files, want the {want_results} written before the failure: "
             f"{results}")


def fault_case():
    spec, timeout, regex = FAULTS[mode]
    out = os.path.join(work, "out")
    extra = ["--debug-fault", spec] + (["--timeout", str(timeout)] if timeout else [])
    code, text, took = run(out, extra)
    if code == 0:
        fail("exit code 0 after a failure", text)
    if not re.search(regex, text):
        fail(f"the output does not name the rank (/{regex}/)", text)
    # Where rank 0 ended the job itself (its watchdog), it said why: the
    # SIGTERM mpirun sends back adds no line.
    if mode in ("stop-setup", "stop-measure") and "ended by SIGTERM" in text:
        fail("rank 0 ended the job and still printed the line of a stop from outside", text)
    # The fault comes after two combinations; the timeout adds timeout + 1 s.
    if took > SWEEP_ALLOWANCE + LIMIT:
        fail(f"took {took:.1f} s", text)
    # A stopped rank 0 gets SIGCONT before SIGTERM when the job is aborted,
    # so it may complete the file it was about to write: whole or absent.
    check_files(out, (2, 3) if spec == "0:write:stop" else (2,))


def kill_trace():
    out = os.path.join(work, "out")
    code, text, _ = run(out, ["--trace"])
    if code != 0:
        fail(f"the first sweep exited {code}", text)
    results = sorted(n for n in os.listdir(out)
                     if n.endswith(".json") and not n.endswith(".trace.json"))
    if len(results) != 3:
        fail(f"the first sweep wrote {results}, want 3 results")
    stamps = {n: os.stat(os.path.join(out, n[:-5] + ".trace.json")).st_mtime_ns for n in results}
    code, text, took = run(out, ["--trace", "--debug-fault", "0:trace:kill"])
    if code == 0 or not re.search(r"rank 0 .*(signal 9|Killed)", text):
        fail(f"exit {code}, or rank 0 not named", text)
    if took > SWEEP_ALLOWANCE + LIMIT:
        fail(f"took {took:.1f} s", text)
    # The last combination's traces are new, its result gone; the others whole.
    left = sorted(n for n in os.listdir(out)
                  if n.endswith(".json") and not n.endswith(".trace.json"))
    renewed = [n for n in results
               if os.stat(os.path.join(out, n[:-5] + ".trace.json")).st_mtime_ns != stamps[n]]
    if len(renewed) != 3:
        fail(f"the rerun's traces were not all rewritten: only {renewed}")
    gone = sorted(set(results) - set(left))
    if len(left) != 2 or len(gone) != 1:
        fail(f"after the kill: {left}; want the old result of the killed combination gone")
    if any(n.startswith(".") for n in os.listdir(out)):
        fail(f"temporary files left behind: {os.listdir(out)}")
    # --resume keeps the two and runs the third again.
    code, text, _ = run(out, ["--trace", "--resume"])
    if code != 0 or text.count("(resumed)") != 2:
        fail(f"--resume exited {code}, or did not resume the other two", text)
    if not os.path.exists(os.path.join(out, gone[0])):
        fail(f"--resume did not write {gone[0]} again", text)


class Job:
    """A 2-rank sweep started in the background, its output taken line by
    line by a reader thread, so that a deadline holds for a job that falls
    silent too (a loop over p.stdout would wait for its next line)."""

    def __init__(self, out, extra):
        args = [mpiexec, "-np", "2", pb, "run", *extra, "--schedule", SCHEDULES, "--out", out]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env)
        self.lines = queue.Queue()
        self.seen = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def until_line(self, prefix, seconds):
        """Takes output until a line starts with `prefix`, the job ends or
        `seconds` pass; returns whether the line came."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if line is None:
                return False
            self.seen.append(line)
            if line.startswith(prefix):
                return True

    def end(self, seconds, why):
        """Waits `seconds` for the job to end (else kills it and fails with
        `why`); returns its exit code and its whole output."""
        try:
            self.p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail(why, "".join(self.seen))
        self.reader.join(timeout=LIMIT)
        while not self.lines.empty():
            line = self.lines.get()
            if line is not None:
                self.seen.append(line)
        return self.p.returncode, "".join(self.seen)


def interrupt():
    out = os.path.join(work, "out")
    sweep = list(SWEEP)
    sweep[sweep.index("-n") + 1] = "150"  # long enough to be interrupted
    job = Job(out, sweep)
    job.until_line("[1/3]", SWEEP_ALLOWANCE + LIMIT)  # one combination written
    job.p.send_signal(signal.SIGINT)
    code, text = job.end(LIMIT, "the job did not end within 10 s of Ctrl-C")
    print(text)
    if code == 0:
        fail("exit code 0 after Ctrl-C", text)
    want = (r"pipebench\[r0\]: run: (stopped by SIGINT|ended by SIGTERM) \(.*\); the results "
            r"finished before it are in " + re.escape(out) +
            r" \(the same command with --resume runs the rest\)")
    if not re.search(want, text):
        fail("no line saying the run was stopped, where its results are and how to go on", text)
    check_files(out, (1, 2))


def rank_pids(out):
    """The job's pipebench ranks: processes whose program is pipebench and
    whose arguments name `out` (not mpiexec, not another test's job)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"pipebench" and out.encode() in argv:
            pids.append(int(entry))
    return pids


def suspend():
    """The whole job held for longer than --timeout (SIGSTOP to every rank,
    as Slurm's suspend or a paused VM does), then continued: a held process
    waits on no one, so the watchdogs do not count it and the sweep runs on
    to its end, each rank saying how long it did not run."""
    out = os.path.join(work, "out")
    sweep = list(SWEEP)
    sweep[sweep.index("-n") + 1] = "20"  # a second or more per combination
    job = Job(out, sweep + ["--timeout", "2"])
    if not job.until_line("[1/3]", SWEEP_ALLOWANCE + LIMIT):
        fail("the first combination did not finish", "".join(job.seen))
    ranks = rank_pids(out)
    if len(ranks) != 2:
        fail(f"found the ranks {ranks}, want 2", "".join(job.seen))
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(4.0)  # > --timeout 2 + its grace
    for pid in ranks:
        os.kill(pid, signal.SIGCONT)
    code, text = job.end(SWEEP_ALLOWANCE + LIMIT, "the job did not end after it was continued")
    print(text)
    if code != 0:
        fail(f"exit {code}: a held job was taken for a stuck one", text)
    if not re.search(r"did not run for [0-9.]+ s.*not counted against --timeout", text):
        fail("no rank said how long it did not run", text)
    check_files(out, (3,))


def disk_full():
    mnt = os.path.join(work, "tiny")
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", mnt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"SKIP: cannot mount a small tmpfs here ({p.stderr.strip() or 'mount failed'}); "
              "the full-disk case needs root in a container that may mount")
        sys.exit(77)
    try:
        out = os.path.join(mnt, "results")
        # Each result is tens of KiB with its per-rank traces: the disk fills
        # within a few combinations.
        code, text, took = run(out, ["--trace"], "1f1b,gpipe,zb-h1,zb-h2,sync-1f1b,async-1f1b,"
                               "hybrid,interleaved-1f1b")
        if code == 0:
            fail("exit code 0 although the disk was full", text)
        if not re.search(r"pipebench\[r0\]: error on rank 0 of 2: .*" + re.escape(out) +
                         r".*No space left on device", text):
            fail("the output does not name rank 0, the path and the reason", text)
        if took > SWEEP_ALLOWANCE + LIMIT:
            fail(f"took {took:.1f} s", text)
        # Results written before the disk filled are complete; traces may be
        # in folders of their own.
        names = os.listdir(out)
        hidden = [n for n in names if n.startswith(".")]
        if hidden:
            fail(f"temporary files left behind: {hidden}")
        for n in names:
            if n.endswith(".json"):
                with open(os.path.join(out, n)) as f:
                    json.load(f)
    finally:
        subprocess.run(["umount", mnt])


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
if mode == "disk-full":
    disk_full()
elif mode == "kill-trace":
    kill_trace()
elif mode == "interrupt":
    interrupt()
elif mode == "suspend":
    suspend()
else:
    fault_case()
print("ok")
