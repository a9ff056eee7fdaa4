#!/usr/bin/env python3
"""zinc launch, the elastic agent (issue 27 items 2-4a). Standard library only.

  --part single  one machine, plain mpirun: a rank killed -> restart reported (when, why, which rank, world
                 size, step, time to resume) and the result bitwise equal to an uninterrupted run; --hostfile
                 with a live host keeps the rank count; a rank stalled (SIGSTOP) ended by the other's collective
                 watchdog (113) and restarted, bitwise; a host that cannot be reached left out after the probe
                 and the job run on the 2 slots left (4 -> 2 ranks), or stopped below --min-ranks; SIGTERM to the launcher saves the whole job (114) and
                 does not restart; --max-restarts 0; usage errors (bad hostfile, --min-ranks > -n, a -n that
                 cannot keep the batch).
  --part netns   two "nodes" (network namespaces joined by a veth pair, scripts/netns-cluster.sh; root only,
                 else exit 77): 2 ranks on 2 nodes bitwise equal to 2 ranks on 1 node at ZeRO stages 1-3
                 (checksums and exported safetensors compared byte for byte), traffic on the veth; a node
                 lost under zinc launch (every process of one namespace killed and the namespace removed): the
                 launcher drops the host, restarts on the other with 1 rank (the largest count that keeps
                 train_batch_size), and the result is bitwise equal to a run with the same rank schedule
                 (2 ranks to the resumed step, then 1) and within 1e-6 (parameter norm) of an uninterrupted
                 2-rank run, same final LR; SIGTERM to the launcher across nodes: saved, 114, bitwise resume.
"""
import argparse
import calendar
import glob
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import checks
import procs
from checks import check

SEED = int(os.environ.get("ZINC_TEST_SEED", str(int(time.time()) % 100000)))
rnd = random.Random(SEED)


def run(cmd, expect=0, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != expect:
        print("command:", " ".join(cmd), "\nexit", p.returncode, "expected", expect, "\n", p.stdout[-3000:])
        sys.exit(1)
    return p.stdout


def latest(d):
    try:
        return open(os.path.join(d, "latest")).read().strip()
    except OSError:
        return None


def checksum(rep):
    return json.load(open(rep))["param_checksum"]


def rank_pids(proc, zinc):
    return procs.rank_pids(proc.pid, zinc)


def wait_latest(p, d, timeout=300):
    t = time.time() + timeout
    while p.poll() is None and latest(d) is None and time.time() < t:
        time.sleep(0.01)


def config(path, stage, extra=None):
    c = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
         "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
         "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 5, "total_num_steps": 200}},
         "zero_optimization": {"stage": stage}, "steps_per_print": 0}
    c.update(extra or {})
    json.dump(c, open(path, "w"))
    return path


def launcher_lines(out, what):
    """The launcher's own report, shown in the test's output."""
    for l in out.splitlines():
        if l.startswith("zinc launch:") or " noticed that process" in l or "Remote daemon" in l:
            print(f"  [{what}] {l}", flush=True)


def utc(stamp):
    """The launcher's 2026-11-27T03:50:12.345Z as seconds since the epoch."""
    base, ms = stamp.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(ms) / 1000


def single_part(a):
    w, zinc = a.workdir, a.zinc
    mpirun = a.mpirun
    cfg = config(os.path.join(w, "c.json"), 2)
    model = ["--config", cfg, "--hidden", "256", "--depth", "3", "--in-dim", "64", "--threads", "1"]
    steps = 120
    base = shlex.split(mpirun) + ["-np", "2", zinc, "train", "--quiet"] + model + ["--steps", str(steps)]
    t0 = time.time()
    run(base + ["--report", os.path.join(w, "full.json")])
    took = time.time() - t0
    want = checksum(os.path.join(w, "full.json"))

    # a rank killed: the restart is reported, the job resumes and ends bitwise where the uninterrupted one does;
    # with --hostfile naming this machine, the probe finds it alive and the rank count stays 2, though the
    # probe's first try fails (an mpirun wrapper makes it, as a launcher's transient failure would): a fast
    # failure is tried again, not taken for a lost host
    hosts = os.path.join(w, "hosts")
    open(hosts, "w").write("# this machine\nlocalhost slots=2\n")
    flaky = os.path.join(w, "flaky-mpirun.sh")
    open(flaky, "w").write("#!/bin/sh\n# the first probe (`... -np 1 true`) fails once\n"
                           "for last; do :; done\n"
                           f"if [ \"$last\" = true ] && mkdir '{w}/flaky.once' 2>/dev/null; then\n"
                           "  echo 'flaky probe: a transient failure' >&2; exit 1\nfi\nexec \"$@\"\n")
    d, rep = os.path.join(w, "ck"), os.path.join(w, "l.json")
    train = [zinc, "train"] + model + ["--steps", str(steps), "--save", d, "--save-every", "10", "--report", rep]
    cmd = [zinc, "launch", "-n", "2", "--min-ranks", "1", "--hostfile", hosts, "--mpirun", f"sh {flaky} {mpirun}",
           "--"] + train
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_latest(p, d)
    time.sleep(rnd.uniform(0, 0.3) * took)
    pids = rank_pids(p, zinc)
    victim_rank = rnd.choice(sorted(pids)) if pids else None
    if victim_rank is not None:
        os.kill(pids[victim_rank], signal.SIGKILL)
    out, _ = p.communicate(timeout=600)
    launcher_lines(out, "rank killed")
    check(p.returncode == 0, f"single: exit {p.returncode}:\n{out[-2500:]}")
    m = re.search(r"zinc launch: (\S+Z): the job on 2 ranks ended with (.*?) after [0-9.]+ s: (.*?)"
                  r"(?:; first reported [0-9.]+ s before)?; (\S+) holds step (\d+)", out)
    check(m is not None, f"single: the failure is reported with when, why and which rank:\n{out[-2500:]}")
    if m:
        check(f"rank {victim_rank} " in m.group(3), f"single: names rank {victim_rank}: {m.group(0)}")
    check(re.search(r"restart 1 of 3 from \S+ \(step \d+\), world size 2 -> 2", out) is not None,
          f"single: restart 1, world size 2 -> 2:\n{out[-2500:]}")
    check("probed 1 host" in out and "1 answered, 0 lost" in out, f"single: localhost probed and alive:\n{out[-2000:]}")
    check("host localhost answered on try 2 (before: exit status 1: flaky probe: a transient failure)" in out,
          f"single: the probe's fast failure tried again and said:\n{out[-2000:]}")
    r = re.search(r"resumed at step (\d+) ([0-9.]+) s after the failure was detected", out)
    check(r is not None, f"single: the time to resume is printed:\n{out[-2500:]}")
    check("finished on 2 ranks after 1 restart" in out, f"single: finished after 1 restart:\n{out[-1500:]}")
    got = checksum(rep) if os.path.exists(rep) else None
    check(got == want, f"single: checksum after the restart {got}, uninterrupted {want}")
    print(f"single: rank {victim_rank} killed; {m.group(2) if m else '?'}; resumed at step "
          f"{r.group(1) if r else '?'} {r.group(2) if r else '?'} s after the failure was detected; checksum "
          f"{'bitwise equal' if got == want else 'DIFFERENT'}", flush=True)

    # SIGTERM to the launcher: passed on to every rank, which save and exit 114; the launcher does not restart
    d2, rep2 = os.path.join(w, "ck2"), os.path.join(w, "t.json")
    train = [zinc, "train", "--quiet"] + model + ["--steps", str(steps), "--save", d2]
    p = subprocess.Popen([zinc, "launch", "-n", "2", "--mpirun", mpirun, "--"] + train, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    while p.poll() is None and len(rank_pids(p, zinc)) < 2:
        time.sleep(0.01)
    time.sleep(rnd.uniform(0.1, 0.5) * took)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=600)
    if p.returncode == 0:
        print("single: the job finished before SIGTERM; not counted", flush=True)
    else:
        check(p.returncode == 114, f"single SIGTERM: exit {p.returncode}, want 114:\n{out[-2000:]}")
        check("passed on to the job as SIGUSR1" in out and "not restarted" in out and "restart 1" not in out,
              f"single SIGTERM: forwarded, not restarted:\n{out[-2000:]}")
        k = latest(d2)
        check(k is not None and f"saved at step {k[4:]}" in out, f"single SIGTERM: saved at {k}:\n{out[-1500:]}")
        run(shlex.split(mpirun) + ["-np", "2", zinc, "train", "--quiet"] + model +
            ["--steps", str(steps), "--resume", d2, "--report", rep2])
        check(checksum(rep2) == want, f"single SIGTERM: resumed from {k}: {checksum(rep2)} vs {want}")
        print(f"single: SIGTERM to the launcher -> exit 114 at {k}, resumed bitwise", flush=True)

    # a rank stalled (SIGSTOP): the other rank's collective watchdog ends it (113), the launcher restarts, bitwise
    d4, rep4 = os.path.join(w, "ck4"), os.path.join(w, "s.json")
    train = [zinc, "train", "--quiet"] + model + ["--steps", str(steps), "--save", d4, "--save-every", "10",
                                                  "--report", rep4]
    env = dict(os.environ, ZINC_COLLECTIVE_TIMEOUT_S="3")
    p = subprocess.Popen([zinc, "launch", "-n", "2", "--mpirun", mpirun, "--"] + train, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    wait_latest(p, d4)
    pids = rank_pids(p, zinc)
    stalled = rnd.choice(sorted(pids)) if pids else None
    if stalled is not None:
        os.kill(pids[stalled], signal.SIGSTOP)
    out, _ = p.communicate(timeout=600)
    launcher_lines(out, "rank stalled")
    check(p.returncode == 0 and "ended with exit status 113 (the collective watchdog" in out and
          "restart 1 of 3" in out, f"stalled rank: exit {p.returncode}, the watchdog's 113 reported:\n{out[-2500:]}")
    got = checksum(rep4) if os.path.exists(rep4) else None
    check(got == want, f"stalled rank: checksum after the restart {got}, uninterrupted {want}")
    print(f"single: rank {stalled} stopped (SIGSTOP): the watchdog ended the job (113), restarted, checksum "
          f"{'bitwise equal' if got == want else 'DIFFERENT'}", flush=True)

    # --max-restarts 0: the first failure ends it
    d3 = os.path.join(w, "ck3")
    train = [zinc, "train", "--quiet"] + model + ["--steps", str(steps), "--save", d3, "--save-every", "5"]
    p = subprocess.Popen([zinc, "launch", "-n", "2", "--max-restarts", "0", "--mpirun", mpirun, "--"] + train,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_latest(p, d3)
    pids = rank_pids(p, zinc)
    if pids:
        os.kill(pids[min(pids)], signal.SIGKILL)
    out, _ = p.communicate(timeout=600)
    check(p.returncode != 0 and "giving up after 0 restarts (--max-restarts 0)" in out,
          f"--max-restarts 0: {p.returncode}\n{out[-1500:]}")

    # a host that cannot run ranks (a name that does not resolve): the first start fails, the probe leaves the
    # host out, and the job runs on the 2 slots left (the largest count that keeps the batch); without
    # --min-ranks, or with one above what is left, it stops saying why
    gh = os.path.join(w, "ghost")
    open(gh, "w").write("localhost slots=2\nzinc-no-such-host.invalid slots=2\n")
    d5, rep5 = os.path.join(w, "ck5"), os.path.join(w, "g.json")
    train = [zinc, "train", "--quiet"] + model + ["--steps", "20", "--save", d5, "--report", rep5]
    out = run([zinc, "launch", "-n", "4", "--min-ranks", "1", "--hostfile", gh, "--mpirun", mpirun, "--"] + train)
    launcher_lines(out, "host unreachable")
    check("host zinc-no-such-host.invalid did not answer" in out and "exit status" in out and
          "after 3 tries within 30 s" in out and "world size 4 -> 2" in out and
          "(no checkpoint yet: from the start)" in out and
          "picked 2 ranks: the largest count from --min-ranks 1 to 2" in out and "counts up to 4 that keep it: 1, 2, 4"
          in out and "finished on 2 ranks after 1 restart" in out, f"unreachable host: 4 -> 2 ranks:\n{out[-2500:]}")
    ref = os.path.join(w, "g2.json")
    run(shlex.split(mpirun) + ["-np", "2", zinc, "train", "--quiet"] + model + ["--steps", "20", "--report", ref])
    check(os.path.exists(rep5) and checksum(rep5) == checksum(ref), "unreachable host: the 2-rank run's result")
    shutil.rmtree(d5, ignore_errors=True)
    out = run([zinc, "launch", "-n", "4", "--min-ranks", "3", "--hostfile", gh, "--mpirun", mpirun, "--"] + train,
              expect=255)
    check("cannot restart: only 2 ranks can run on the hosts left, fewer than --min-ranks 3" in out,
          f"--min-ranks 3 with 2 slots left: {out[-1500:]}")
    out = run([zinc, "launch", "-n", "4", "--hostfile", gh, "--mpirun", mpirun, "--"] + train, expect=255)
    check("cannot restart: the hosts left hold 2 ranks, fewer than -n 4 (give --min-ranks M" in out,
          f"no --min-ranks with 2 slots left: {out[-1500:]}")

    # usage errors, each naming what is wrong
    bad = os.path.join(w, "badhosts")
    open(bad, "w").write("nodeA slots=2\nnodeB cpus=4\n")
    tr = ["--", zinc, "train", "--config", cfg, "--save", os.path.join(w, "x")]
    out = run([zinc, "launch", "-n", "2", "--hostfile", bad] + tr, expect=2)
    check(f"{bad}:2: \"cpus=4\"" in out and "slots=K" in out, f"bad hostfile: {out[-400:]}")
    open(bad, "w").write("nodeA slots=0\n")
    out = run([zinc, "launch", "-n", "2", "--hostfile", bad] + tr, expect=2)
    check(f"{bad}:1:" in out and "from 1 to" in out, f"slots=0: {out[-400:]}")
    out = run([zinc, "launch", "-n", "2", "--min-ranks", "3"] + tr, expect=2)
    check("--min-ranks 3 is more than -n 2" in out, f"--min-ranks > -n: {out[-400:]}")
    out = run([zinc, "launch", "-n", "3", "--min-ranks", "1"] + tr, expect=2)
    check("does not load at -n 3 ranks" in out and "1, 2, 4" in out, f"-n 3 cannot keep the batch: {out[-600:]}")


# ---- two nodes in network namespaces ----

SCRIPT = None


def cluster_cmd(*args):
    return [SCRIPT] + [str(x) for x in args]


def remove_stale():
    """Clusters a killed earlier run of this test left (zl<pid>, its pid gone)."""
    names = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout.split()
    for n in set(re.findall(r"\b(zl(\d+))-(?:n[01]|sw)\b", " ".join(names))):
        if not os.path.exists(f"/proc/{n[1]}"):
            subprocess.run(cluster_cmd("down", n[0]))


def veth_bytes(name, node):
    out = subprocess.run(["ip", "-s", "-n", f"{name}-n{node}", "link", "show", f"{name}{'ab'[node]}"],
                         stdout=subprocess.PIPE, text=True).stdout.split("\n")
    for i, l in enumerate(out):
        if l.strip().startswith("RX:"):
            return int(out[i + 1].split()[0])
    return 0


def netns_part(a):
    global SCRIPT
    SCRIPT = os.path.join(a.source, "scripts", "netns-cluster.sh")
    p = subprocess.run([SCRIPT, "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("netns: skipped:", p.stdout.strip() or f"netns-cluster.sh check exited {p.returncode}")
        return 77
    remove_stale()
    name = "zl%d" % os.getpid()
    # the cluster is removed however the test ends (a failed check, an exception, SIGTERM from ctest's timeout)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    run(cluster_cmd("up", name))
    try:
        return netns_checks(a, name)
    finally:
        subprocess.run(cluster_cmd("down", name))
        left = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
        check(name not in left, f"netns: namespaces left after down: {left}")
        links = subprocess.run(["ip", "link"], stdout=subprocess.PIPE, text=True).stdout
        check(f"{name}a" not in links and f"{name}b" not in links, "netns: a veth left in the host namespace")
        check(not os.path.exists(f"/etc/netns/{name}-n0"), "netns: /etc/netns entries left")


def netns_checks(a, name):
    w, zinc = a.workdir, a.zinc
    hosts = os.path.join(w, "hosts")
    open(hosts, "w").write(run(cluster_cmd("hostfile", name)))
    across = cluster_cmd("mpirun", name) + ["--hostfile", hosts]
    out = run(across + ["-np", "2", "sh", "-c", "echo rank $OMPI_COMM_WORLD_RANK on $(hostname)"])
    check(f"rank 0 on {name}-node0" in out and f"rank 1 on {name}-node1" in out, f"netns: one rank per node:\n{out}")
    local = shlex.split(a.mpirun) + ["-np", "2"]
    model = ["--hidden", "128", "--depth", "3", "--in-dim", "64", "--threads", "1"]
    steps = 30
    for stage in (1, 2, 3):
        cfg = config(os.path.join(w, f"s{stage}.json"), stage)
        args = [zinc, "train", "--quiet", "--config", cfg] + model + ["--steps", str(steps)]
        rx0 = veth_bytes(name, 1)
        res = {}
        for where, launcher in (("1node", local), ("2nodes", across)):
            rep, d = os.path.join(w, f"{where}{stage}.json"), os.path.join(w, f"{where}{stage}")
            run(launcher + args + ["--report", rep, "--save", d])
            st = os.path.join(w, f"{where}{stage}.safetensors")
            run([zinc, "checkpoint", "export", d, "--out", st])
            res[where] = (checksum(rep), open(st, "rb").read())
        rx = veth_bytes(name, 1) - rx0
        same_sum = res["1node"][0] == res["2nodes"][0]
        same_bytes = res["1node"][1] == res["2nodes"][1]
        check(same_sum and same_bytes, f"netns stage {stage}: 2 nodes {res['2nodes'][0]} vs 1 node {res['1node'][0]}, "
              f"exported parameters {'equal' if same_bytes else 'DIFFER'}")
        check(rx > 10000, f"netns stage {stage}: only {rx} bytes reached node 1 over the veth")
        print(f"netns stage {stage}: 2 ranks on 2 nodes vs 2 ranks on 1 node: checksum {res['2nodes'][0]} "
              f"{'bitwise equal' if same_sum else 'DIFFERENT'}, exported safetensors "
              f"{'byte for byte equal' if same_bytes else 'DIFFERENT'} ({len(res['1node'][1])} bytes); "
              f"{rx} bytes received by node 1 on its veth", flush=True)

    # SIGTERM to the launcher across nodes: SIGUSR1 through mpirun to both ranks, saved, 114, not restarted
    cfg = os.path.join(w, "s1.json")
    args = [zinc, "train", "--quiet", "--config", cfg] + model
    d = os.path.join(w, "term")
    p = subprocess.Popen([zinc, "launch", "-n", "2", "--hostfile", hosts, "--mpirun", " ".join(cluster_cmd("mpirun", name)),
                          "--"] + args + ["--steps", "100000", "--save", d, "--save-every", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_latest(p, d)
    time.sleep(rnd.uniform(0, 1))
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=600)
    k = latest(d)
    check(p.returncode == 114 and "restart 1" not in out and k and f"saved at step {k[4:]}" in out,
          f"netns SIGTERM: exit {p.returncode} (want 114), latest {k}:\n{out[-2000:]}")
    if k:
        kk = int(k[4:])
        ra, rb = os.path.join(w, "term_a.json"), os.path.join(w, "term_b.json")
        run(local + args + ["--steps", str(kk + 10), "--report", ra])
        run(across + ["-np", "2"] + args + ["--steps", str(kk + 10), "--resume", d, "--report", rb])
        check(checksum(ra) == checksum(rb), f"netns SIGTERM: resumed from {k} {checksum(rb)} vs {checksum(ra)}")
        print(f"netns: SIGTERM to the launcher -> both nodes saved at step {kk}, exit 114; resumed to step {kk + 10}: "
              f"{'bitwise equal' if checksum(ra) == checksum(rb) else 'DIFFERENT'} to an uninterrupted run", flush=True)

    # a node lost under zinc launch, at stages 2 and 3
    steps = 80
    for stage in (2, 3):
        node_lost(a, name, hosts, across, local, model, steps, stage)
    return 0


def node_lost(a, name, hosts, across, local, model, steps, stage):
    w, zinc = a.workdir, a.zinc
    cfg = os.path.join(w, f"s{stage}.json")
    args = [zinc, "train", "--threads", "1", "--config", cfg] + model[:-2]
    full = os.path.join(w, f"lost_full{stage}.json")
    t0 = time.time()
    run(local + args + ["--quiet", "--steps", str(steps), "--report", full])
    took = time.time() - t0
    d, rep = os.path.join(w, f"lost{stage}"), os.path.join(w, f"lost{stage}.json")
    cmd = [zinc, "launch", "-n", "2", "--min-ranks", "1", "--hostfile", hosts, "--probe-timeout", "20",
           "--mpirun", " ".join(cluster_cmd("mpirun", name)), "--"] + args + \
          ["--steps", str(steps), "--save", d, "--save-every", "5", "--report", rep]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_latest(p, d)
    time.sleep(rnd.uniform(0, 0.3) * took)
    t_kill = time.time()
    at = latest(d)
    subprocess.run(cluster_cmd("kill", name, 1))
    out, _ = p.communicate(timeout=600)
    launcher_lines(out, f"node lost, stage {stage}")
    open(os.path.join(w, f"lost{stage}.log"), "w").write(out)
    # node 1 is back for what follows (the next stage's node loss)
    subprocess.run(cluster_cmd("down", name))
    run(cluster_cmd("up", name))
    check(p.returncode == 0, f"node lost, stage {stage}: exit {p.returncode}:\n{out[-3000:]}")
    det = re.search(r"zinc launch: (\S+Z): the job on 2 ranks ended with (.*?) after [0-9.]+ s(.*?); \S+ holds step "
                    r"(\d+)", out)
    check(det is not None, f"node lost, stage {stage}: the failure is reported:\n{out[-3000:]}")
    check(f"host {name}-node1 did not answer" in out, f"node lost, stage {stage}: node 1 dropped:\n{out[-3000:]}")
    rs = re.search(r"restart 1 of 3 from \S+ \(step (\d+)\), world size 2 -> 1", out)
    check(rs is not None, f"node lost, stage {stage}: restarted on 1 rank:\n{out[-3000:]}")
    check("picked 1 rank: the largest count from --min-ranks 1 to 1" in out and "gradient_accumulation_steps 4" in out,
          f"node lost, stage {stage}: says why 1 rank:\n{out[-3000:]}")
    res = re.search(r"resumed at step (\d+) ([0-9.]+) s after the failure was detected \(([0-9.]+) s", out)
    check(res is not None and "finished on 1 rank after 1 restart" in out,
          f"node lost, stage {stage}: resumed and finished on 1 rank:\n{out[-3000:]}")
    if not (det and rs and res and os.path.exists(rep)):
        return
    k = int(rs.group(1))
    detect = utc(det.group(1)) - t_kill
    # the same rank schedule without a failure: 2 ranks to step k, then 1 rank from k
    sched = os.path.join(w, f"sched{stage}")
    run(local + args + ["--quiet", "--steps", str(k), "--save", sched])
    sref = os.path.join(w, f"sched{stage}.json")
    run(args + ["--quiet", "--steps", str(steps), "--resume", sched, "--report", sref])
    got, ref, unint = json.load(open(rep)), json.load(open(sref)), json.load(open(full))
    check(got["param_checksum"] == ref["param_checksum"],
          f"node lost, stage {stage}: {got['param_checksum']} vs the same rank schedule {ref['param_checksum']}")
    rel = abs(got["param_l2_norm"] - unint["param_l2_norm"]) / unint["param_l2_norm"]
    check(rel <= 1e-6 and got["final_lr"] == unint["final_lr"],
          f"node lost, stage {stage}: norm rel diff {rel:.2e} (> 1e-6?), lr {got['final_lr']} vs {unint['final_lr']}")
    loss_d = abs(got["final_loss"] - unint["final_loss"]) if "final_loss" in got and "final_loss" in unint else None
    print(f"netns stage {stage}: node 1 lost (latest {at} when killed); {det.group(2)}{det.group(3)}; detected "
          f"{detect:.2f} s after the kill; restarted from step {k} on 1 rank, resumed {float(res.group(2)):.2f} s "
          f"after the detection ({res.group(3)} s of it the new job's start and load); result "
          f"{'bitwise equal' if got['param_checksum'] == ref['param_checksum'] else 'DIFFERENT'} to the same rank "
          f"schedule (2 ranks to step {k}, 1 after), vs the uninterrupted 2-rank run: norm rel diff {rel:.2e}, "
          f"final loss diff {loss_d if loss_d is not None else 'n/a'}, final lr equal {got['final_lr'] == unint['final_lr']}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--part", choices=["single", "netns"], required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    print(f"launch {a.part}: seed {SEED} (ZINC_TEST_SEED={SEED} repeats the kill times)", flush=True)
    rc = single_part(a) if a.part == "single" else netns_part(a)
    if rc == 77:
        return 77
    print(f"launch_{a.part}:", "FAILED %d" % checks.failures if checks.failures else "passed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
