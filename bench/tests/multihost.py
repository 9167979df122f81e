#!/usr/bin/env python3
"""Runs across hosts with a network between them: test hosts made by
ci/netns-hosts (network namespaces joined by a veth link, each with its own
address and host name), one Open MPI job across them started by mpirun on
the first host with Open MPI's own launcher (the agent enters the other
host's namespace), TCP only (btl tcp,self over the hosts' link).

check    4 ranks on 2 hosts (2 each), cpu backend, 1f1b and interleaved-1f1b
         with --check: every result passes, its environment names each
         rank's host (rank_hosts = h0 h0 h1 h1), and the transfers between
         the hosts were fitted as the "network" link.
check-dp the same shape as a 2 x 2 data-parallel pipeline (--stages 2 on 4
         ranks: each replica's stages on one host, the all-reduce across
         them); for a run command that takes W = P x D ranks.
shaped   2 ranks, one per host, the link shaped by tc (tbf) to 1 Gbit/s and
         then 200 Mbit/s; timed backend, interleaved-1f1b (V = 2) with
         manual cuts at and inside layers, so that every link carries
         message sizes from 256 KiB to 1.25 MiB: the bandwidth `run` fits from its own
         transfers (metrics.theory.links, "network") is within 10% of the
         configured rate, and the simulator fed with it predicts the
         measured median step from 8% short to 5% long (SIM_SHORT,
         SIM_LONG). A rate that misses is
         measured once more and fails only when both runs miss (timings on
         a shared machine).
kill     4 ranks on 2 hosts, timed backend, three combinations; rank 3 (on
         the second host) SIGKILLs itself in the last one: the job ends
         within 10 s, naming rank 3 and its host, the two results before
         it are intact and alone, and --resume completes the sweep.

Skips (exit 77), saying why, without root, iproute2's ip and tc, or
network namespaces. Each case makes hosts of its own, named after the case
and this process, and removes them however it ends.

usage: multihost.py MODE PIPEBENCH MPIEXEC WORKDIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

mode, pb, mpiexec, work = sys.argv[1:5]
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
NETNS = os.path.join(ROOT, "ci", "netns-hosts")
NAME = f"ppb{mode[:2]}{os.getpid()}"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why, output=""):
    sys.exit(f"FAIL ({mode}): {why}" + (f"\n--- output ---\n{output}" if output else ""))


def host(i):
    return f"{NAME}-h{i}"


def netns(*args, check=True):
    p = subprocess.run([NETNS, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        fail(f"ci/netns-hosts {' '.join(args)}: exit {p.returncode}", p.stdout + p.stderr)
    return p


def hosts_mpirun(per_host, args):
    """The command of one job across the hosts: mpirun on host 0, per_host[i]
    ranks on host i (filled in rank order), pipebench ARGS."""
    placement = ",".join(f"{host(i)}:{n}" for i, n in enumerate(per_host))
    flags = netns("mpirun-flags").stdout.split()
    return [NETNS, "exec", NAME, "0", "--", mpiexec, "-np", str(sum(per_host)), "--host",
            placement, *flags, pb, *args]


def run(cmd, timeout=180):
    """Runs CMD, printing its output with the seconds since the start of
    each line; returns (exit code, output, seconds, {line: seconds})."""
    print("$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    seen = {}
    lines = []
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # A silent hang sends no line: a timer ends it (the hosts' cleanup ends
    # what it started there).
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    for line in p.stdout:
        t = time.monotonic() - start
        seen.setdefault(line.strip(), t)
        lines.append(line)
        print(f"[{t:6.2f}] {line}", end="", flush=True)
    code = p.wait()
    timer.cancel()
    took = time.monotonic() - start
    if took >= timeout:
        fail(f"did not end within {timeout} s: a hang", "".join(lines))
    print(f"--- exit {code} after {took:.1f} s", flush=True)
    return code, "".join(lines), took, seen


def results(out):
    docs = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(path) as f:
            try:
                docs[os.path.basename(path)] = json.load(f)
            except ValueError as e:
                fail(f"{path} is not a complete JSON document: {e}")
    return docs


def network_link(doc, name):
    links = [l for l in doc["metrics"].get("theory", {}).get("links", [])
             if l["path"] == "network"]
    if not links:
        fail(f"{name}: no network link in metrics.theory.links: "
             f"{doc['metrics'].get('theory', {}).get('links')}")
    return links[0]


def check_case(per_host, extra, want_files, stage_per_rank=True):
    out = os.path.join(work, "check")
    code, text, _, _ = run(hosts_mpirun(per_host, [
        "run", "--backend", "cpu", "--model", "gpt-tiny", "--partition", "layer",
        "--microbatches", "4", "--check", "-n", "1", "-w", "0", "--out", out, *extra]))
    if code != 0:
        fail(f"exit code {code}", text)
    docs = results(out)
    if len(docs) != want_files:
        fail(f"{len(docs)} result files in {out}, want {want_files}: {list(docs)}")
    want_hosts = [host(i) for i, n in enumerate(per_host) for _ in range(n)]
    for name, doc in docs.items():
        check = doc["metrics"].get("check", {})
        if doc["status"] != "ok" or not check.get("passed"):
            fail(f"{name}: status {doc['status']}, check {check}")
        e = doc["environment"]
        if e.get("rank_hosts") != want_hosts or e["hosts"] != [host(0), host(1)]:
            fail(f"{name}: environment rank_hosts {e.get('rank_hosts')}, hosts {e['hosts']}; "
                 f"want {want_hosts}")
        link = None
        if stage_per_rank:  # with replicas the links are per stage, not per rank
            link = network_link(doc, name)
            if link["messages"] < 1:
                fail(f"{name}: the network link was fitted on no transfer: {link}")
        print(f"{name}: check {check['max_rel_error']:.1e}, rank_hosts {e['rank_hosts']}, "
              f"network link {link}")


# Cuts at a layer's end and inside layers: messages of 1x, 2x and 5x
# seq 128 x hidden 256 x mbs 2 x 4 B (256 KiB to 1.25 MiB), a spread that
# separates latency from bandwidth (operator cuts send only 4x and 5x).
SHAPED_MODEL = "gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1000,mbs=2"
SHAPED_CUTS = "manual:0-6,7-8,9-14,15-16"
RATES = {"1gbit": 1e9 / 8, "200mbit": 200e6 / 8}  # bytes/s (tc's rates are decimal)
# The simulated step's tolerance, one-sided as its error is. At 200 Mbit/s
# the simulator predicts a step short by about 3% of the communication it
# waits for (the fit takes each size's best quartile; TCP over the token
# bucket, with both directions busy, does not always reach it): 0.955-0.978
# of the measured step over six runs on a quiet machine, 0.948 twice in a
# row under CI's load, where 1 Gbit/s read 0.975. Never long so far.
SIM_SHORT, SIM_LONG = 0.08, 0.05


def shaped_once(rate, bytes_per_s, attempt):
    """One run on the link shaped to RATE; returns what is wrong (empty: ok)."""
    netns("shape", NAME, rate)
    out = os.path.join(work, f"shaped-{rate}-{attempt}")
    code, text, _, _ = run(hosts_mpirun([1, 1], [
        "run", "--backend", "timed", "--model", SHAPED_MODEL, "--schedule", "interleaved-1f1b",
        "--chunks", "2", "--partition", SHAPED_CUTS, "--microbatches", "8", "-n", "3", "-w", "1",
        "--out", out]))
    if code != 0:
        fail(f"{rate}: exit code {code}", text)
    docs = results(out)
    if len(docs) != 1:
        fail(f"{rate}: {len(docs)} result files, want 1: {list(docs)}")
    name, doc = next(iter(docs.items()))
    link = network_link(doc, name)
    if len(link["sizes"]) < 2:
        fail(f"{rate}: transfers of fewer than 2 sizes, no bandwidth to fit: {link}")
    if link["bandwidth_bytes_per_second"] is None:
        # A timing on a shared machine too: the transfers' times did not grow
        # with their size this time. Measured again, as a miss is.
        return [f"{rate}: no bandwidth fitted (the times of sizes {link['sizes']} did not grow "
                f"with the size): {link}"]
    fitted = link["bandwidth_bytes_per_second"]
    measured = doc["metrics"]["step_time_seconds"]["median"]
    predicted = doc["metrics"]["theory"]["step_time_seconds"]
    print(f"{rate}: configured {bytes_per_s / 1e6:.1f} MB/s, fitted {fitted / 1e6:.1f} MB/s "
          f"({fitted / bytes_per_s:.3f}), latency {link['latency_seconds'] * 1e3:.3f} ms over "
          f"{link['messages']} transfers of sizes {link['sizes']}; step measured "
          f"{measured * 1e3:.1f} ms, simulated {predicted * 1e3:.1f} ms "
          f"({predicted / measured:.3f})", flush=True)
    bad = []
    if abs(fitted / bytes_per_s - 1) > 0.10:
        bad.append(f"{rate}: fitted bandwidth {fitted / 1e6:.1f} MB/s is not within 10% of "
                   f"the configured {bytes_per_s / 1e6:.1f} MB/s")
    if not 1 - SIM_SHORT <= predicted / measured <= 1 + SIM_LONG:
        bad.append(f"{rate}: simulated step {predicted * 1e3:.1f} ms is not within "
                   f"{SIM_SHORT:.0%} short or {SIM_LONG:.0%} long of the measured "
                   f"{measured * 1e3:.1f} ms")
    return bad


def shaped():
    # The figures are timings on a shared machine: a rate that misses is
    # measured once more (as the nightly gate confirms a regression), and
    # fails only when both runs miss.
    bad = []
    for rate, bytes_per_s in RATES.items():
        first = shaped_once(rate, bytes_per_s, 1)
        if first:
            print(f"{rate}: measuring again: {'; '.join(first)}", flush=True)
            again = shaped_once(rate, bytes_per_s, 2)
            if again:
                bad += first + again
    if bad:
        fail("; ".join(bad))


def kill():
    out = os.path.join(work, "kill")
    sweep = ["run", "--backend", "timed", "--partition", "layer", "--microbatches", "4", "-n", "2",
             "-w", "0", "--schedule", "1f1b,gpipe,zb-h1", "--out", out]
    code, text, took, seen = run(hosts_mpirun([2, 2], [*sweep, "--debug-fault", "3:measure:kill"]))
    if code == 0:
        fail("exit code 0 after a rank was killed", text)
    # Open MPI names the rank and the node it ran on.
    if not re.search(rf"rank 3\b.*\b{re.escape(host(1))}\b.*(signal 9|Killed)", text):
        fail(f"the output does not name rank 3 on {host(1)} and the signal", text)
    # The fault comes as the third combination starts its timed steps, just
    # after the second one's row.
    second = [t for line, t in seen.items() if line.startswith("[2/3]")]
    if not second:
        fail("no row of the second combination", text)
    kill_to_exit = took - second[0]
    print(f"kill-to-exit: at most {kill_to_exit:.1f} s (from the second row to the job's end)")
    if kill_to_exit > 10:
        fail(f"the job took {kill_to_exit:.1f} s after the kill to end", text)
    names = sorted(os.listdir(out))
    docs = results(out)
    if len(docs) != 2 or len(names) != 2 or any(d["status"] != "ok" for d in docs.values()):
        fail(f"want the 2 ok results written before the kill and nothing else, found {names}")
    code, text, _, _ = run(hosts_mpirun([2, 2], [*sweep, "--resume"]))
    if code != 0:
        fail(f"--resume: exit code {code}", text)
    if len(re.findall(r"\(resumed\)", text)) != 2:
        fail("--resume did not skip the two finished combinations", text)
    docs = results(out)
    if len(docs) != 3 or any(d["status"] != "ok" for d in docs.values()):
        fail(f"--resume left {list(docs)}, want 3 ok results")


def main():
    if os.geteuid() != 0:
        skip("test hosts are network namespaces: needs root")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            skip(f"no '{tool}' here (iproute2, util-linux)")
    probe = subprocess.run(["ip", "netns", "add", f"{NAME}-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip(f"cannot make a network namespace here: {probe.stderr.strip()}")
    subprocess.run(["ip", "netns", "delete", f"{NAME}-probe"])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    netns("up", NAME, "2")
    try:
        if mode == "check":
            check_case([2, 2], ["--schedule", "1f1b,interleaved-1f1b", "--chunks", "2"], 2)
        elif mode == "check-dp":
            check_case([2, 2], ["--stages", "2", "--schedule", "1f1b"], 1, stage_per_rank=False)
        elif mode == "shaped":
            shaped()
        elif mode == "kill":
            kill()
        else:
            fail(f"unknown mode '{mode}' (check, check-dp, shaped, kill)")
    finally:
        netns("down", NAME, check=False)
    print("ok")


main()
