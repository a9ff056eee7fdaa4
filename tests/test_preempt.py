#!/usr/bin/env python3
"""Preemption-safe `zinc train` (issue 27): a SIGTERM, SIGINT or SIGUSR1 reaching one rank or all of them at a
random point of the steps and saves stops every rank at the same step boundary, saves (--save), removes the
NVMe swap files and exits 114 with "saved at step k, resumable with --resume DIR" (115 without --save); the
run resumed from DIR ends with parameters bitwise equal to an uninterrupted run (--report checksums). A
second signal ends the process at once and leaves the previous `latest` loadable. Standard library only.

  --part mlp   MLP, 1 and 2 ranks (mpirun), signals to one rank and to all, NVMe swap files removed
  --part gpt2  GPT-2, 1 and 2 ranks
  --part twice the second signal during the save
  --part keep  --keep-last K, and a kill while an old checkpoint is removed
  --part world the same global batch resumed on another rank count; elasticity refused
  --part launch zinc launch: one rank killed once, restarted from latest, bitwise; a deterministic failure
"""
import argparse
import glob
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time

import checks
from checks import check
from procs import rank_pids

SEED = int(os.environ.get("ZINC_TEST_SEED", str(int(time.time()) % 100000)))
rnd = random.Random(SEED)


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect:
        print("command:", " ".join(cmd), "\nexit", p.returncode, "expected", expect, "\n", p.stdout[-3000:])
        sys.exit(1)
    return p.stdout


def ranks_of(proc, zinc, nranks):
    """{rank: pid} of the zinc processes under proc (itself when started without mpirun)."""
    if nranks == 1:
        return {0: proc.pid}
    return rank_pids(proc.pid, zinc)


def start(cmd, zinc, nranks):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while True:
        r = ranks_of(p, zinc, nranks)
        if len(r) == nranks or p.poll() is not None or time.time() > deadline:
            return p, r
        time.sleep(0.01)


class Runner:
    def __init__(self, a):
        self.a = a
        self.mpirun = shlex.split(a.mpirun)

    def cmd(self, nranks, args):
        base = [self.a.zinc, "train", "--quiet", "--threads", "1"] + args
        return base if nranks == 1 else self.mpirun + ["-np", str(nranks)] + base

    def checksum(self, nranks, args, report):
        t0 = time.time()
        run(self.cmd(nranks, args + ["--report", report]))
        self.took = time.time() - t0  # how long an uninterrupted run takes: the signals fall inside it
        return json.load(open(report))["param_checksum"]

    def preempt(self, name, nranks, args, steps, save, sig, to_all, want, window, extra=()):
        """Starts the run, waits a random time within window, signals one rank (or all), and checks the exit,
        the message and (with save) a resume ending at `want`. Returns the step it stopped at, or None when it
        finished before the signal."""
        w = self.a.workdir
        cmd = self.cmd(nranks, args + list(extra) + ["--steps", str(steps)] + (["--save", save] if save else []))
        p, pids = start(cmd, self.a.zinc, nranks)
        check(len(pids) == nranks, f"{name}: found the ranks' processes {pids}")
        time.sleep(rnd.uniform(window[0] * self.took, window[1] * self.took))
        targets = list(pids.values()) if to_all else [pids[rnd.randrange(nranks)]]
        t0 = time.time()
        for pid in targets:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        out, _ = p.communicate(timeout=600)
        took = time.time() - t0
        if p.returncode == 0:
            print(f"{name}: finished before the signal; not counted", flush=True)
            return None
        code = 114 if save else 115
        check(p.returncode == code, f"{name}: exit {p.returncode}, want {code}:\n{out[-2000:]}")
        line = [l for l in out.splitlines() if "stopped at step" in l]
        check(len(line) == 1, f"{name}: one line says where it stopped (rank 0):\n{out[-2000:]}")
        if not line:
            return None
        k = int(line[0].split("stopped at step ")[1].split(";")[0].split(" ")[0])
        signame = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGUSR1: "SIGUSR1"}[sig]
        check(line[0].startswith("zinc train: " + signame), f"{name}: names the signal: {line[0]}")
        if save:
            check(f"saved at step {k}" in line[0] and f"resumable with --resume {save}" in line[0], f"{name}: {line[0]}")
            check(open(os.path.join(save, "latest")).read().strip() == f"step{k}", f"{name}: latest is step{k}")
            got = self.checksum(nranks, args + ["--steps", str(steps), "--resume", save], os.path.join(w, name + ".json"))
            check(got == want, f"{name}: resumed from step {k}: checksum {got}, uninterrupted {want}")
        else:
            check("nothing saved (no --save DIR)" in line[0], f"{name}: {line[0]}")
        print(f"{name}: {signame} to {'all ranks' if to_all else 'one rank'} -> stopped at step {k}, exit "
              f"{p.returncode}, {took:.2f} s from the signal to the exit", flush=True)
        return k


def mlp_part(r, a):
    w = a.workdir
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2}, "steps_per_print": 0}, open(cfg, "w"))
    model = ["--config", cfg, "--hidden", "256", "--depth", "3", "--in-dim", "64"]
    steps = 120
    sigs = [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1]
    for nranks in (1, 2):
        want = r.checksum(nranks, model + ["--steps", str(steps)], os.path.join(w, f"full{nranks}.json"))
        stopped = 0
        for trial in range(6):
            save = os.path.join(w, f"ck{nranks}_{trial}")
            k = r.preempt(f"mlp_np{nranks}_{trial}", nranks, model, steps, save, sigs[trial % 3], to_all=trial >= 3,
                          want=want, window=(0.05, 0.6), extra=["--save-every", "7"] if trial % 2 else [])
            stopped += k is not None
        check(stopped >= 3, f"mlp np{nranks}: only {stopped} of 6 runs were stopped before their end")
        r.preempt(f"mlp_np{nranks}_nosave", nranks, model, steps, None, signal.SIGTERM, False, want, (0.05, 0.6))
    # the NVMe swap files are removed on the way out
    nv = os.path.join(w, "nvme")
    os.makedirs(nv, exist_ok=True)
    cfgn = os.path.join(w, "cn.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": nv}},
               "steps_per_print": 0}, open(cfgn, "w"))
    modeln = ["--config", cfgn] + model[2:]
    p = subprocess.run(r.cmd(1, modeln + ["--steps", "1"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        print("mlp nvme: the NVMe store is not usable here; swap-file removal not checked:", p.stdout[-300:])
        return
    for nranks in (1, 2):
        want = r.checksum(nranks, modeln + ["--steps", str(steps)], os.path.join(w, f"nfull{nranks}.json"))
        for trial in range(2):
            k = r.preempt(f"mlp_nvme_np{nranks}_{trial}", nranks, modeln, steps, os.path.join(w, f"nck{nranks}_{trial}"),
                          signal.SIGTERM, trial == 1, want, (0.05, 0.6))
            if k is not None:
                check(os.listdir(nv) == [], f"mlp nvme np{nranks}: swap files left in {nv}: {os.listdir(nv)}")


def gpt2_part(r, a):
    w = a.workdir
    cfg = os.path.join(w, "g.json")
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
               "gradient_clipping": 1.0, "zero_optimization": {"stage": 3}, "steps_per_print": 0}, open(cfg, "w"))
    text = "".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(6000))
    tok = os.path.join(w, "tok.bin")
    import struct
    with open(tok, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(text)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(text), *[ord(c) for c in text]))
    model = ["--model", "gpt2", "--config", cfg, "--data", tok, "--vocab", "256", "--context", "32", "--layers", "2",
             "--heads", "2", "--width", "64"]
    steps = 300  # enough that the 2-rank runs train well beyond their start-up
    for nranks in (1, 2):
        want = r.checksum(nranks, model + ["--steps", str(steps)], os.path.join(w, f"gfull{nranks}.json"))
        stopped = 0
        for trial in range(4):
            k = r.preempt(f"gpt2_np{nranks}_{trial}", nranks, model, steps, os.path.join(w, f"gck{nranks}_{trial}"),
                          signal.SIGTERM, trial >= 2, want, (0.05, 0.6), extra=["--save-every", "5"] if trial % 2 else [])
            stopped += k is not None
        check(stopped >= 2, f"gpt2 np{nranks}: only {stopped} of 4 runs were stopped before their end")


def twice_part(r, a):
    """Two SIGTERMs, the second while the preemption's save writes: the process ends at once (by the signal)
    and `latest` still names the previous checkpoint, which resumes to the uninterrupted result."""
    w = a.workdir
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 1}, "steps_per_print": 0}, open(cfg, "w"))
    model = ["--config", cfg, "--hidden", "1024", "--depth", "4", "--in-dim", "256"]  # ~3M parameters: saves take a while
    steps = 40
    for nranks in (1, 2):
        want = r.checksum(nranks, model + ["--steps", str(steps)], os.path.join(w, f"full{nranks}.json"))
        caught = 0
        for trial in range(8):
            save = os.path.join(w, f"ck{nranks}_{trial}")
            p, pids = start(r.cmd(nranks, model + ["--steps", str(steps), "--save", save, "--save-every", "3"]),
                            a.zinc, nranks)
            latest = os.path.join(save, "latest")
            while p.poll() is None and not os.path.exists(latest):
                time.sleep(0.005)
            time.sleep(rnd.uniform(0, 0.5))
            before = open(latest).read().strip() if os.path.exists(latest) else None
            victim = pids[rnd.randrange(nranks)]
            try:
                os.kill(victim, signal.SIGTERM)
            except ProcessLookupError:
                pass
            # the second signal as soon as a newer save's staging directory appears
            partial = None
            while p.poll() is None and partial is None:
                for d in glob.glob(os.path.join(save, ".step*.partial")):
                    if before is None or int(d.split(".step")[1].split(".")[0]) > int(before[4:]):
                        partial = d
                time.sleep(0.001)
            now = open(latest).read().strip() if os.path.exists(latest) else None
            try:
                os.kill(victim, signal.SIGTERM)
            except ProcessLookupError:
                pass
            out, _ = p.communicate(timeout=600)
            after = open(latest).read().strip()
            died = p.returncode != 114 and p.returncode != 0
            if partial and died and after == before == now:
                caught += 1
            check(p.returncode != 0, f"twice np{nranks} {trial}: the run was stopped, not finished:\n{out[-1500:]}")
            # whatever the second signal interrupted, latest loads and resumes to the uninterrupted result
            got = r.checksum(nranks, model + ["--steps", str(steps), "--resume", save],
                             os.path.join(w, f"r{nranks}_{trial}.json"))
            check(got == want, f"twice np{nranks} {trial}: resumed from {after}: checksum {got}, want {want}")
            print(f"twice np{nranks} {trial}: exit {p.returncode}, latest {before} -> {after}, "
                  f"second signal during a save: {bool(partial and died and after == before)}", flush=True)
            if caught >= 2:
                break
        check(caught >= 1, f"twice np{nranks}: no trial ended by the second signal during the save")


def tags(d):
    return sorted(n for n in os.listdir(d) if n.startswith("step"))


def keep_part(r, a):
    """--keep-last K: the newest K step tags stay, latest's never goes, other tags stay; a kill while an old
    tag is being removed leaves latest loadable and the next save cleans up."""
    w = a.workdir
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2}, "steps_per_print": 0}, open(cfg, "w"))
    model = ["--config", cfg, "--hidden", "64", "--depth", "2"]
    out = run(r.cmd(1, model + ["--steps", "2", "--keep-last", "2"]), expect=2)
    check("--keep-last needs --save DIR" in out, f"--keep-last without --save: {out[-300:]}")
    out = run(r.cmd(1, model + ["--steps", "2", "--save", os.path.join(w, "x"), "--keep-last", "0"]), expect=2)
    check("--keep-last" in out and "0" in out, f"--keep-last 0: {out[-300:]}")
    for nranks in (1, 2):
        want = r.checksum(nranks, model + ["--steps", "14"], os.path.join(w, f"full{nranks}.json"))
        d = os.path.join(w, f"ck{nranks}")
        run(r.cmd(nranks, model + ["--steps", "10", "--save", d, "--save-every", "2", "--keep-last", "2"]))
        check(tags(d) == ["step10", "step8"], f"np{nranks} keep 2 of 5: {tags(d)}")
        # a user-named tag is not counted or removed
        os.rename(os.path.join(d, "step8"), os.path.join(d, "best"))
        # a resume that reaches an older step than the newest tag: latest (step12 after the kill) is kept
        env = dict(os.environ, ZINC_CKPT_TEST_KILL_IN_RETENTION="1")
        p = subprocess.run(r.cmd(nranks, model + ["--steps", "12", "--save", d, "--save-every", "2", "--resume", d,
                                                  "--keep-last", "1"]),
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check(p.returncode != 0, f"np{nranks}: the kill hook ended the run ({p.returncode})")
        check(open(os.path.join(d, "latest")).read().strip() == "step12", f"np{nranks}: latest is step12 after the kill")
        check(os.path.isdir(os.path.join(d, ".step10.removing")), f"np{nranks}: step10 was aside when killed: "
              f"{os.listdir(d)}")
        run([a.zinc, "checkpoint", "inspect", d, "--verify"])
        got = r.checksum(nranks, model + ["--steps", "14", "--save", d, "--save-every", "2", "--resume", d,
                                          "--keep-last", "1"], os.path.join(w, f"k{nranks}.json"))
        check(got == want, f"np{nranks}: resumed after the kill: checksum {got}, want {want}")
        left = sorted(os.listdir(d))
        check(tags(d) == ["step14"] and "best" in left and not [n for n in left if n.endswith(".removing")],
              f"np{nranks}: after the next save: {left}")
        # checkpoint.writer.decoupled: the old tags are removed by the publisher thread after each publish
        d = os.path.join(w, f"dec{nranks}")
        run(r.cmd(nranks, model + ["--steps", "10", "--save", d, "--save-every", "2", "--keep-last", "2",
                                   "--set", "checkpoint.writer.decoupled=true"]))
        check(tags(d) == ["step10", "step8"], f"np{nranks} decoupled keep 2 of 5: {tags(d)}")
        check(open(os.path.join(d, "latest")).read().strip() == "step10", f"np{nranks} decoupled: latest")
        run([a.zinc, "checkpoint", "inspect", d, "--verify"])


def world_part(r, a):
    """The same global batch on another rank count: 2 ranks trained, resumed on 1 (and 1 -> 2), with
    gradient_accumulation_steps derived; the result matches the uninterrupted run. A train_batch_size that a
    rank count cannot keep is refused naming the usable counts; `elasticity` is refused in DeepSpeed's terms."""
    w = a.workdir
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 3, "total_num_steps": 12}},
               "zero_optimization": {"stage": 2}, "steps_per_print": 0}, open(cfg, "w"))
    model = ["--config", cfg, "--hidden", "64", "--depth", "2"]
    full = {}
    for nranks in (1, 2):
        rep = os.path.join(w, f"full{nranks}.json")
        r.checksum(nranks, model + ["--steps", "12"], rep)
        full[nranks] = json.load(open(rep))
    for src, dst in ((2, 1), (1, 2)):
        d = os.path.join(w, f"ck{src}to{dst}")
        run(r.cmd(src, model + ["--steps", "6", "--save", d]))
        rep = os.path.join(w, f"r{src}to{dst}.json")
        out = run(r.cmd(dst, model + ["--steps", "12", "--resume", d, "--report", rep]))
        got = json.load(open(rep))
        ref = full[src]
        check(got["final_lr"] == ref["final_lr"], f"{src}->{dst}: lr {got['final_lr']} vs {ref['final_lr']}")
        rel = abs(got["param_l2_norm"] - ref["param_l2_norm"]) / ref["param_l2_norm"]
        check(rel <= 1e-6, f"{src}->{dst}: parameter norm {got['param_l2_norm']} vs {ref['param_l2_norm']} "
              f"(rel {rel:.2e} > 1e-6)")
        check("train_batch_size" not in out, f"{src}->{dst}: no batch warning: {out[-500:]}")
        print(f"world {src}->{dst}: checksum {got['param_checksum']} (uninterrupted {src}-rank run "
              f"{ref['param_checksum']}, {'bitwise' if got['param_checksum'] == ref['param_checksum'] else 'not bitwise'}), "
              f"norm rel diff {rel:.2e}", flush=True)
    # 3 ranks cannot keep train_batch_size 8 with micro 2
    p = subprocess.run(r.cmd(3, model + ["--steps", "1"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(p.returncode != 0 and "run on a rank count that keeps it: 1, 2, 4" in p.stdout,
          f"3 ranks refused naming 1, 2, 4: {p.stdout[-600:]}")
    el = os.path.join(w, "el.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "elasticity": {"enabled": True, "max_train_batch_size": 64, "micro_batch_sizes": [2]},
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, open(el, "w"))
    p = subprocess.run(r.cmd(1, ["--config", el, "--steps", "1"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(p.returncode != 0 and "removed in DeepSpeed 0.19" in p.stdout and "re-derives" in p.stdout and
          "zinc launch --min-ranks" in p.stdout,
          f"elasticity refused: {p.stdout[-600:]}")


def launch_part(r, a):
    """zinc launch: one rank killed (SIGKILL) once at a random point, the job restarted from latest, ending
    bitwise where an uninterrupted run ends; a deterministic failure (the same status at the same step twice)
    is not restarted again."""
    w = a.workdir
    cfg = os.path.join(w, "c.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2}, "steps_per_print": 0}, open(cfg, "w"))
    model = ["--config", cfg, "--hidden", "256", "--depth", "3", "--in-dim", "64"]
    steps = 120
    want = r.checksum(2, model + ["--steps", str(steps)], os.path.join(w, "full.json"))
    d, rep = os.path.join(w, "ck"), os.path.join(w, "l.json")
    train = [a.zinc, "train", "--quiet", "--threads", "1"] + model + ["--steps", str(steps), "--save", d,
                                                                      "--save-every", "10", "--report", rep]
    cmd = [a.zinc, "launch", "-n", "2", "--max-restarts", "2", "--mpirun", a.mpirun, "--"] + train
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while p.poll() is None and latest_or_none(d) is None:
        time.sleep(0.01)
    time.sleep(rnd.uniform(0, 0.3) * r.took)
    pids = ranks_of(p, a.zinc, 2)
    victim = rnd.choice(sorted(pids.values())) if pids else None
    t0 = time.time()
    if victim:
        os.kill(victim, signal.SIGKILL)
    out, _ = p.communicate(timeout=600)
    check(p.returncode == 0, f"launch: exit {p.returncode}:\n{out[-2500:]}")
    check(out.count("restart 1 of 2 from") == 1 and "restart 2" not in out, f"launch: one restart:\n{out[-2500:]}")
    check("finished on 2 ranks after 1 restart" in out, f"launch: says it finished after 1 restart:\n{out[-1500:]}")
    got = json.load(open(rep))["param_checksum"] if os.path.exists(rep) else None
    check(got == want, f"launch: checksum after the restart {got}, uninterrupted {want}")
    print(f"launch: SIGKILL to pid {victim}; restarted once; {time.time() - t0:.2f} s from the kill to the end; "
          f"checksum {'equal' if got == want else 'DIFFERENT'}", flush=True)
    # a deterministic failure: every attempt fails alike before a step (a relative nvme_path is refused)
    bad = os.path.join(w, "bad.json")
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "rel"}}},
              open(bad, "w"))
    train = [a.zinc, "train", "--quiet", "--config", bad, "--steps", "3", "--save", os.path.join(w, "ck2")]
    out = run([a.zinc, "launch", "-n", "2", "--max-restarts", "5", "--mpirun", a.mpirun, "--"] + train, expect=1)
    check("the same failure (exit status 1) before any checkpoint twice" in out and out.count("restart ") == 1,
          f"launch: a deterministic failure stops after one restart:\n{out[-2000:]}")
    out = run([a.zinc, "launch", "-n", "2", "--", a.zinc, "train", "--config", cfg], expect=2)
    check("needs --save DIR" in out, f"launch without --save: {out[-300:]}")


def latest_or_none(d):
    try:
        return open(os.path.join(d, "latest")).read().strip()
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--part", choices=["mlp", "gpt2", "twice", "keep", "world", "launch"], required=True)
    a = ap.parse_args()
    import shutil
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    print(f"preempt {a.part}: seed {SEED} (ZINC_TEST_SEED={SEED} repeats the signal times)", flush=True)
    r = Runner(a)
    {"mlp": mlp_part, "gpt2": gpt2_part, "twice": twice_part, "keep": keep_part, "world": world_part, "launch": launch_part}[a.part](r, a)
    print(f"preempt_{a.part}:", "FAILED %d" % checks.failures if checks.failures else "passed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
