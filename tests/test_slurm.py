#!/usr/bin/env python3
"""zinc under a real Slurm (issue 27, item 4b): a one-node cluster from Debian's packages (munged, slurmctld,
slurmd) that this test configures in a temporary directory and starts itself (no systemd), then:

  srun      `srun -n 2 zinc train` (MpiDefault=pmix: Open MPI's ranks bootstrap through Slurm's PMIx server)
            is one 2-rank job: world_size 2, parameters (--report checksum) and checkpoint shards bitwise
            equal to `mpirun -np 2` with --threads 1
  signal    `scancel --signal=USR1` (what Slurm's --signal sends before a time limit) reaching the ranks of an
            srun step: exit 114, saved at step k; resumed under srun, bitwise equal to the uninterrupted run
  launch    `salloc -n 2 zinc launch -- zinc train ...` (no -n): zinc launch sees the allocation
            (SLURM_JOB_ID, SLURM_NTASKS), starts the ranks with srun (their parent is slurmstepd); one rank
            SIGKILLed is restarted from the latest checkpoint in a new job step, ending bitwise equal
  preempt   `scancel --signal=USR1` to a salloc job running zinc launch: the ranks save and exit 114, zinc
            launch does not restart a preempted job and exits 114

Skips (exit 77) with the reason when it cannot run: not root, a package missing, a daemon that does not start
(its log's tail is printed). Every daemon is a child of this process (and gets SIGTERM if it dies); at the end
every job is cancelled and every process that carries this cluster's SLURM_CONF is ended. Standard library
only. ZINC_TEST_SEED=N repeats the signal times."""
import argparse
import ctypes
import glob
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
failures = 0
SEED = int(os.environ.get("ZINC_TEST_SEED", str(int(time.time()) % 100000)))
rnd = random.Random(SEED)
PACKAGES = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client",
            "salloc": "slurm-client", "scancel": "slurm-client", "sinfo": "slurm-client", "squeue": "slurm-client"}


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg, flush=True)


def skip(why):
    print("slurm: skipped:", why, flush=True)
    sys.exit(SKIP)


def die_with_parent():
    """preexec_fn: the daemon gets SIGTERM when this test ends in any way (ctest's timeout included)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return f"({path}: {e})"


class Cluster:
    """munged + slurmctld + slurmd for one node, everything under `base`."""

    def __init__(self, base):
        self.base = base
        self.procs = []
        self.conf = os.path.join(base, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        for k in [k for k in self.env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del self.env[k]  # a test run inside someone's allocation must not talk to that cluster
        # Open MPI's shared-memory segments (a rank killed on purpose leaves its own behind) in the cluster's
        # directory rather than /dev/shm
        self.env["OMPI_MCA_btl_vader_backing_directory"] = self.path("tmp")

    def path(self, *p):
        return os.path.join(self.base, *p)

    def daemon(self, name, cmd, log):
        out = open(self.path("log", name + ".out"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, preexec_fn=die_with_parent)
        self.procs.append((name, p, log or out.name))
        return p

    def fail_start(self, what):
        dead = [f"{name} exited with status {p.returncode}" for name, p, _ in self.procs if p.poll() is not None]
        lines = [f"{'; '.join(dead) or what}; the daemons' logs:"]
        for name, p, log in self.procs:
            if not os.path.exists(log):  # it failed before opening its log file: its stderr says why
                log = self.path("log", name + ".out")
            state = "running" if p.poll() is None else f"exited {p.returncode}"
            lines.append(f"--- {name} ({state}), the end of {log}:\n{tail(log)}")
        self.stop()
        skip("\n".join(lines))

    def start(self):
        for d in ("munge", "state", "spool", "log", "tmp"):
            os.makedirs(self.path(d), mode=0o700)
        os.makedirs(self.path("run"), mode=0o755)  # munged wants its socket's directory open to all
        os.chmod(self.base, 0o755)
        key = self.path("munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = self.path("run", "munge.sock")
        # in the foreground munged logs to stderr: its .out file
        self.daemon("munged", ["munged", "-F", "--key-file=" + key, "--socket=" + sock,
                               "--pid-file=" + self.path("run", "munged.pid"), "--seed-file=" + self.path("munge", "seed")],
                    None)
        if not self.wait(lambda: os.path.exists(sock), 15):
            self.fail_start("munged did not create its socket " + sock)
        cpus = max(2, os.cpu_count() or 1)
        with open(self.conf, "w") as f:
            f.write(f"""# a one-node cluster for zinc's test (tests/test_slurm.py); everything under {self.base}
ClusterName=zinctest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
TmpFS={self.path('tmp')}
SlurmctldPidFile={self.path('run', 'slurmctld.pid')}
SlurmdPidFile={self.path('run', 'slurmd.pid')}
SlurmctldLogFile={self.path('log', 'slurmctld.log')}
SlurmdLogFile={self.path('log', 'slurmd.log')}
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=pmix
ReturnToService=2
KillWait=5
MinJobAge=2
NodeName=zinc1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=zinc Nodes=zinc1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""")
        # their own log files say more than their stderr (which is kept in log/NAME.out)
        self.daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf], self.path("log", "slurmctld.log"))
        self.daemon("slurmd", ["slurmd", "-D", "-N", "zinc1", "-f", self.conf], self.path("log", "slurmd.log"))
        t0 = time.time()
        if not self.wait(lambda: self.node_state() == "idle", 60):
            self.fail_start(f"the node is not idle after 60 s (sinfo: {self.node_state()!r})")
        print(f"slurm: cluster up in {time.time() - t0:.1f} s ({self.base})", flush=True)
        mpis = subprocess.run(["srun", "--mpi=list"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=30).stdout
        if "pmix" not in mpis:
            self.fail_start("Slurm has no PMIx plugin (srun --mpi=list: " + " ".join(mpis.split()) + "); Open MPI's "
                            "ranks cannot bootstrap under srun")

    def wait(self, cond, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if any(p.poll() is not None for _, p, _ in self.procs):
                return False
            if cond():
                return True
            time.sleep(0.2)
        return False

    def node_state(self):
        try:
            return subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, timeout=10).stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def jobs(self):
        out = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=10).stdout
        return [j for j in out.split() if j.isdigit()]

    def stop(self):
        if not self.procs:
            return
        try:
            ctld = [p for name, p, _ in self.procs if name == "slurmctld"]
            for j in self.jobs() if ctld and ctld[0].poll() is None else []:
                subprocess.run(["scancel", j], env=self.env, timeout=10)
            self.wait(lambda: not self.jobs(), 15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for _, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        # what the daemons started (slurmstepd, ranks) carries this cluster's SLURM_CONF: end those that remain
        mark = ("SLURM_CONF=" + self.conf).encode()
        for pid in ours(lambda env: mark in env):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def ours(pred):
    me = os.getpid()
    return [int(d.split("/")[2]) for d in glob.glob("/proc/[0-9]*") if int(d.split("/")[2]) != me
            and pred(environ(int(d.split("/")[2])))]


CONF = None  # this cluster's SLURM_CONF: the ranks of another cluster on the machine are not ours


def ranks(zinc, step_not=None):
    """{rank: (pid, environ)} of the zinc processes that this cluster's srun started (SLURM_PROCID), in a job
    step other than step_not when given."""
    exe = os.path.realpath(zinc)
    found = {}
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d.split("/")[2])
        try:
            if os.path.realpath(d + "/exe") != exe:
                continue
        except OSError:
            continue
        env = dict(kv.split(b"=", 1) for kv in environ(pid) if b"=" in kv)
        if (b"SLURM_PROCID" in env and b"SLURM_STEP_ID" in env and env.get(b"SLURM_CONF") == CONF
                and (step_not is None or env[b"SLURM_STEP_ID"] not in step_not)):
            found[int(env[b"SLURM_PROCID"])] = (pid, env)
    return found


def parent_name(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{ppid}/comm") as f:
            return f.read().strip()
    except (OSError, ValueError, IndexError):
        return "?"


def wait_ranks(p, zinc, n, seconds=60, step_not=None):
    deadline = time.time() + seconds
    while time.time() < deadline and p.poll() is None:
        r = ranks(zinc, step_not)
        if len(r) == n:
            return r
        time.sleep(0.02)
    return ranks(zinc, step_not)


class Lines:
    """A process's output read as it comes, each line with the time it arrived (when zinc launch saw what)."""

    def __init__(self, p):
        self.p, self.lines = p, []
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        for line in self.p.stdout:
            self.lines.append((time.time(), line))

    def finish(self, timeout):
        self.p.wait(timeout)
        self.t.join(30)
        return "".join(l for _, l in self.lines)

    def when(self, text):
        return next((t for t, l in self.lines if text in l), None)


def run(cmd, env, expect=0, timeout=300):
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != expect:
        check(False, f"{' '.join(cmd)}\nexit {p.returncode}, expected {expect}:\n{p.stdout[-3000:]}")
    return p.stdout, time.time() - t0


def shards(d):
    """The checkpoint's shard files' sections (after each 4 KiB header, which holds the save's unique id)."""
    tag = open(os.path.join(d, "latest")).read().strip()
    out = {}
    for f in sorted(glob.glob(os.path.join(d, tag, "*.zshard"))):
        with open(f, "rb") as fh:
            out[os.path.basename(f)] = fh.read()[4096:]
    return tag, out


def report(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        skip("needs root: the test starts slurmctld and slurmd as SlurmUser=root (run the suite as root)")
    missing = sorted({pkg for exe, pkg in PACKAGES.items() if not shutil.which(exe)})
    if missing:
        skip(f"Slurm is not installed (missing {', '.join(missing)}): scripts/install-deps.sh installs "
             "munge, slurmctld, slurmd and slurm-client")
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    # sockets (munge, slurmd's steps, PMIx) live under the cluster's directory: keep its path short
    base = tempfile.mkdtemp(prefix="zslurm", dir=tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp")
    print(f"slurm: seed {SEED} (ZINC_TEST_SEED={SEED} repeats the signal times)", flush=True)
    c = Cluster(base)
    global CONF
    CONF = c.conf.encode()
    try:
        c.start()
        parts(c, a)
    finally:
        c.stop()
        if not failures:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"slurm: the cluster's logs are kept in {base}/log", flush=True)
    print("slurm_one_node:", "FAILED %d" % failures if failures else "passed", flush=True)
    return 1 if failures else 0


def parts(c, a):
    w, env, zinc = a.workdir, c.env, a.zinc
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2}, "steps_per_print": 0}, open(cfg, "w"))
    steps = 80
    train = [zinc, "train", "--quiet", "--threads", "1", "--config", cfg, "--hidden", "256", "--depth", "3",
             "--in-dim", "64", "--steps", str(steps)]

    # srun: the same job as mpirun, bitwise
    ref_rep, ref_ck = os.path.join(w, "mpirun.json"), os.path.join(w, "ck_mpirun")
    _, took = run(shlex.split(a.mpirun) + ["-np", "2"] + train + ["--save", ref_ck, "--report", ref_rep], env)
    want = report(ref_rep).get("param_checksum")
    rep, ck = os.path.join(w, "srun.json"), os.path.join(w, "ck_srun")
    out, took_srun = run(["srun", "-n", "2"] + train + ["--save", ck, "--report", rep], env)
    got = report(rep)
    check(got.get("world_size") == 2, f"srun: one job of 2 ranks (world_size {got.get('world_size')}):\n{out[-1500:]}")
    check(want and got.get("param_checksum") == want,
          f"srun: checksum {got.get('param_checksum')}, mpirun {want}")
    if os.path.exists(os.path.join(ck, "latest")):
        (t1, s1), (t2, s2) = shards(ref_ck), shards(ck)
        check(t1 == t2 and list(s1) == list(s2) and len(s1) == 2 and s1 == s2,
              f"srun: checkpoint {t2} {list(s2)} equal to mpirun's {t1} {list(s1)}")
    else:
        check(False, f"srun: no checkpoint in {ck}")
    print(f"srun: srun -n 2 ({took_srun:.1f} s) vs mpirun -np 2 ({took:.1f} s): checksum {got.get('param_checksum')} "
          f"{'equal' if got.get('param_checksum') == want else 'DIFFERENT'}, shards compared", flush=True)

    # signal: scancel --signal=USR1 to an srun step
    for trial in range(3):
        sck = os.path.join(w, f"ck_signal{trial}")
        p = subprocess.Popen(["srun", "-n", "2"] + train + ["--save", sck], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        found = wait_ranks(p, zinc, 2)
        check(len(found) == 2, f"signal: the 2 ranks of the srun step found: {sorted(found)}")
        job = next(iter(found.values()))[1][b"SLURM_JOB_ID"].decode() if found else None
        time.sleep(rnd.uniform(0.1, 0.5) * took_srun / (trial + 1))
        t0 = time.time()
        if job:
            subprocess.run(["scancel", "--signal=USR1", job], env=env, timeout=30)
        out, _ = p.communicate(timeout=300)
        if p.returncode == 0:
            print(f"signal {trial}: finished before the signal; again, sooner", flush=True)
            continue
        stop = [l for l in out.splitlines() if "stopped at step" in l]
        check(p.returncode == 114 and len(stop) == 1 and stop[0].startswith("zinc train: SIGUSR1"),
              f"signal: srun exit {p.returncode} (want 114) and one line naming SIGUSR1:\n{out[-2000:]}")
        if stop:
            k = stop[0].split("stopped at step ")[1].split(";")[0].split(" ")[0]
            rrep = os.path.join(w, f"resumed{trial}.json")
            run(["srun", "-n", "2"] + train + ["--resume", sck, "--report", rrep], env)
            got = report(rrep).get("param_checksum")
            check(got == want, f"signal: resumed from step {k}: checksum {got}, uninterrupted {want}")
            print(f"signal: scancel --signal=USR1 job {job} -> exit {p.returncode}, saved at step {k}, "
                  f"{time.time() - t0:.2f} s to the exit; resumed under srun: checksum "
                  f"{'equal' if got == want else 'DIFFERENT'}", flush=True)
        break
    else:
        check(False, "signal: every run finished before its signal")

    # launch: zinc launch inside salloc, a rank killed once
    lck, lrep = os.path.join(w, "ck_launch"), os.path.join(w, "launch.json")
    cmd = ["salloc", "-n", "2", zinc, "launch", "--max-restarts", "2", "--"] + train + [
        "--save", lck, "--save-every", "10", "--report", lrep]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = Lines(p)
    deadline = time.time() + 120
    while p.poll() is None and not os.path.exists(os.path.join(lck, "latest")) and time.time() < deadline:
        time.sleep(0.01)
    found = ranks(zinc)
    parents = sorted({parent_name(pid) for pid, _ in found.values()})
    check(len(found) == 2 and parents == ["slurmstepd"], f"launch: 2 ranks started by srun (parents {parents})")
    step0 = sorted({e[b"SLURM_STEP_ID"] for _, e in found.values()})
    victim = found[rnd.randrange(2)][0] if len(found) == 2 else None
    t0 = time.time()
    if victim:
        os.kill(victim, signal.SIGKILL)
    restarted = wait_ranks(p, zinc, 2, 120, step_not=step0)
    t_up = time.time()
    step1 = sorted({e[b"SLURM_STEP_ID"] for _, e in restarted.values()})
    out = lines.finish(300)
    t_end, t_ended = time.time(), lines.when("ended with")
    check(p.returncode == 0, f"launch: exit {p.returncode}:\n{out[-3000:]}")
    check("inside Slurm job" in out and "starting 2 ranks (SLURM_NTASKS) with srun" in out,
          f"launch: says it found the allocation and uses srun:\n{out[-2000:]}")
    restarts = len(re.findall(r"^zinc launch: \S+: restart \d+ of ", out, re.M))
    check(out.count(": restart 1 of 2 from ") == 1 and re.search(r"finished (on \d+ ranks? )?after 1 restart", out),
          f"launch: one restart:\n{out[-2500:]}")
    check(len(step1) == 1 and step0 != step1, f"launch: the restart is a new job step ({step0} -> {step1})")
    got = report(lrep).get("param_checksum")
    check(got == want, f"launch: checksum after the restart {got}, uninterrupted {want}")
    detect = f"{t_ended - t0:.2f} s" if t_ended else "?"
    print(f"launch: salloc -n 2 zinc launch: SIGKILL to rank pid {victim} (job step {b','.join(step0).decode()} -> {b','.join(step1).decode()}); "
          f"{restarts} restart(s); "
          f"{detect} from the kill to zinc launch's report of the failure (srun --kill-on-bad-exit), {t_up - t0:.2f} s "
          f"to both ranks of the new step running, {t_end - t0:.2f} s to the end; checksum "
          f"{'equal' if got == want else 'DIFFERENT'}", flush=True)

    # preempt: the scheduler's signal under zinc launch is not restarted
    pck = os.path.join(w, "ck_preempt")
    slow = train[:-1] + [str(steps * 20)]
    p = subprocess.Popen(["salloc", "-n", "2", zinc, "launch", "-n", "2", "--"] + slow + ["--save", pck], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = wait_ranks(p, zinc, 2)
    job = next(iter(found.values()))[1][b"SLURM_JOB_ID"].decode() if found else None
    time.sleep(rnd.uniform(0.1, 0.5) * took_srun)
    if job:
        subprocess.run(["scancel", "--signal=USR1", job], env=env, timeout=30)
    out, _ = p.communicate(timeout=300)
    check(p.returncode == 114 and "preempted by a signal" in out and "not restarted" in out and "restart 1" not in out,
          f"preempt: zinc launch exit {p.returncode} (want 114, not restarted):\n{out[-2000:]}")
    check(os.path.exists(os.path.join(pck, "latest")), f"preempt: a checkpoint was saved in {pck}")
    print(f"preempt: scancel --signal=USR1 job {job} under zinc launch -> exit {p.returncode}, not restarted",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
