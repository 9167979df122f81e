#!/usr/bin/env python3
"""A rank stopped in a data-parallel step is named by its MPI rank, wherever
the stop lands (an action, the all-reduce, the barrier that starts a step):
4 ranks (2 stages x 2 replicas, dp-pp: rank = stage x 2 + replica) of
`pipebench run --timeout 2` on the timed backend, many warm-up steps; MPI
rank 2 (stage 1, replica 0) gets SIGSTOP once the steps run. A waiting rank's
watchdog must end the job within a few seconds, and its line must name the
stopped rank as "rank 2 (stage 1, replica 0)", itself by MPI rank with its
stage and replica, never a stage index alone. Every line names its own rank
so; the stopped rank is named by a rank that waits on it directly (its
pipeline neighbour, or its replica in the all-reduce), which need not be
the first line: a rank stopped in the middle of a shared-memory exchange
can hold up its neighbour, so that a replica of the neighbour waits in the
all-reduce and names the neighbour. Every rank that finds the job stuck at
about the same time prints its line (the watchdog lingers before the abort).

usage: stop_rank.py PIPEBENCH MPIEXEC WORKDIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

pb, mpiexec, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
args = [mpiexec, "-np", "4", pb, "run", "--stages", "2", "--backend", "timed", "--schedule", "1f1b",
        "--partition", "layer", "--microbatches", "4", "-w", "100000", "-n", "1", "--timeout", "2",
        "--out", os.path.join(work, "out")]
job = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rank_pid(rank):
    """The pid of the pipebench process of MPI rank `rank` of this job."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if (pb.encode() in cmd and b"--timeout" in cmd and
                f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ and
                os.path.join(work, "out").encode() in cmd):
            return int(pid)
    return None


pid = None
deadline = time.monotonic() + 20
while pid is None and time.monotonic() < deadline and job.poll() is None:
    time.sleep(0.2)
    pid = rank_pid(2)
if pid is None:
    job.kill()
    sys.exit(f"FAIL: no process of rank 2 found\n{job.communicate()[1]}")
time.sleep(2.5)  # setup and the first warm-up steps (each a few ms)
os.kill(pid, signal.SIGSTOP)
stopped = time.monotonic()
try:
    out, err = job.communicate(timeout=30)
except subprocess.TimeoutExpired:
    os.kill(pid, signal.SIGKILL)
    job.kill()
    sys.exit("FAIL: the job did not end 30 s after rank 2 stopped")
took = time.monotonic() - stopped
try:
    os.kill(pid, signal.SIGKILL)
except ProcessLookupError:
    pass
print(err)
print(f"--- exit {job.returncode}, {took:.1f} s after the stop")
lines = [l for l in err.splitlines() if l.startswith("pipebench")]
if job.returncode == 0:
    sys.exit("FAIL: exit 0")
if took > 10:
    sys.exit(f"FAIL: {took:.1f} s after the stop, want < 10")
stuck = [l for l in lines if "stuck" in l]
if not stuck:
    sys.exit("FAIL: no watchdog line")
for line in stuck:
    if not re.search(r": rank [0-3] \(stage [01], replica [01]\): step \d+ stuck", line):
        sys.exit(f"FAIL: the reporting rank is not named by MPI rank, stage and replica: {line}")
# Named as the rank waited for (after "stuck"), not as a line's own reporter.
named = [l for l in stuck if "rank 2 (stage 1, replica 0)" in l.split(" stuck for ", 1)[-1]]
if not named:
    sys.exit("FAIL: no line names the stopped rank 2 (stage 1, replica 0):\n" + "\n".join(stuck))
print("ok")
