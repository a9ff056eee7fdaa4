#!/usr/bin/env python3
"""How long `zinc launch` takes to notice a loss and to resume (issue 27): repeated trials of a 2-rank MLP job
(ZeRO 2, train_batch_size 8, micro 2, --save-every 5) losing

  --what rank   one rank SIGKILLed on this machine (plain mpirun): restarted on 2 ranks
  --what node   node 1 of a two-namespace cluster (scripts/netns-cluster.sh; root): every process there
                killed and the namespace removed; restarted on node 0 with 1 rank

at a random time after the first checkpoint. Per trial: detect = from the kill to the launcher's failure
line (its UTC timestamp); restart = from detection to the restarted job's start (the host probes when
--hostfile is given); resume = from detection to the new job's "resumed from" line; down = detect + resume.

  bench/launch_recovery.py --zinc build/zinc --what node --trials 5 [--mpirun "mpiexec --oversubscribe"]
      [--mpirun-options]   (--what node: the options after --mpirun's first word go to the cluster's mpirun)
"""
import argparse
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import test_launch as T  # noqa: E402  (the test's helpers: rank pids, latest, the config, UTC stamps)

SCRIPT = os.path.join(HERE, "..", "scripts", "netns-cluster.sh")


def trial(a, work, i, name):
    d = os.path.join(work, f"ck{i}")
    cfg = T.config(os.path.join(work, "c.json"), 2)
    train = [a.zinc, "train", "--threads", "1", "--config", cfg, "--hidden", "256", "--depth", "3", "--steps", "400",
             "--save", d, "--save-every", "5"]
    if a.what == "node":
        hosts = os.path.join(work, "hosts")
        open(hosts, "w").write(subprocess.check_output([SCRIPT, "hostfile", name], text=True))
        extra = a.mpirun.split(" ", 1)[1] if a.mpirun_options else ""
        launch = ["--min-ranks", "1", "--hostfile", hosts, "--mpirun", f"{SCRIPT} mpirun {name} {extra}".strip()]
    else:
        launch = ["--mpirun", a.mpirun]
    p = subprocess.Popen([a.zinc, "launch", "-n", "2"] + launch + ["--"] + train, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    T.wait_latest(p, d)
    time.sleep(random.uniform(0.2, 2.0))
    if a.what == "node":
        t_kill = time.time()
        subprocess.run([SCRIPT, "kill", name, "1"])
    else:
        pids = T.rank_pids(p, a.zinc)
        t_kill = time.time()
        os.kill(pids[random.choice(sorted(pids))], signal.SIGKILL)
    out, _ = p.communicate(timeout=600)
    det = re.search(r"zinc launch: (\S+Z): the job on 2 ranks ended with", out)
    rst = re.search(r"world size 2 -> (\d+)\S*.*?, ([0-9.]+) s after the failure was detected", out)
    res = re.search(r"resumed at step \d+ ([0-9.]+) s after the failure was detected", out)
    if p.returncode != 0 or not (det and rst and res):
        print(f"trial {i}: exit {p.returncode}, report incomplete:\n{out[-2000:]}")
        return None
    r = {"detect": T.utc(det.group(1)) - t_kill, "restart": float(rst.group(2)), "resume": float(res.group(1)),
         "world": int(rst.group(1))}
    r["down"] = r["detect"] + r["resume"]
    print(f"trial {i}: detect {r['detect']:.2f} s, restart {r['restart']:.2f} s, resume {r['resume']:.2f} s, "
          f"down {r['down']:.2f} s, world 2 -> {r['world']}", flush=True)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--what", choices=["rank", "node"], required=True)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--mpirun", default="mpiexec --oversubscribe --bind-to none")
    ap.add_argument("--mpirun-options", action="store_true",
                    help="--what node: pass --mpirun's options (after its first word) to the cluster's mpirun too")
    a = ap.parse_args()
    a.zinc = os.path.abspath(a.zinc)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    work = tempfile.mkdtemp(prefix="zinc-launch-bench.")
    name = "zb%d" % os.getpid()
    rows = []
    try:
        for i in range(a.trials):
            if a.what == "node":
                subprocess.run([SCRIPT, "down", name])
                subprocess.run([SCRIPT, "up", name], check=True, stdout=subprocess.DEVNULL)
            r = trial(a, work, i, name)
            if r:
                rows.append(r)
    finally:
        if a.what == "node":
            subprocess.run([SCRIPT, "down", name])
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.what} lost, {len(rows)} of {a.trials} trials (seconds: min / median / max):")
    for k in ("detect", "restart", "resume", "down"):
        v = [r[k] for r in rows]
        if v:
            print(f"  {k:8s} {min(v):.2f} / {statistics.median(v):.2f} / {max(v):.2f}")
    return 0 if len(rows) == a.trials else 1


if __name__ == "__main__":
    sys.exit(main())
