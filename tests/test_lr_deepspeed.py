#!/usr/bin/env python3
"""Every LR schedule step for step against a real DeepSpeed engine (issue 43): the same ds_config through
deepspeed.initialize on the CPU (tests/ds_lr_reference.py: a tiny torch model, DS_ACCELERATOR=cpu, one process,
optimizer.param_groups[0]['lr'] read before each step) and through `zinc train --report` (its `lrs`), for
WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest:
  - fp32, no skipped steps;
  - skipped steps: inf added to a gradient at chosen steps (zinc: the test hook ZINC_TEST_INF_GRAD_STEPS, fp16;
    DeepSpeed: the loss times inf, bf16 at ZeRO stage 1, which checks overflow in 0.19.8, since its CPU
    accelerator has no fp16); both skip the same steps, and a skipped step does not advance the schedule;
  - resumed runs: saved after step K, resumed from that checkpoint (zinc --save/--resume, DeepSpeed
    save_checkpoint/load_checkpoint into a fresh engine).
The lrs must be equal bit for bit (zinc keeps Python's operand order), and the skipped-step counts equal.
Needs a Python with deepspeed 0.19.8 and torch (--python; ZINC_DS_PYTHON overrides it): exit 77, naming the
reason, when it cannot import them."""
import argparse
import json
import os
import shutil
import subprocess
import sys

import checks
from checks import check

STEPS = 14
BASE = {"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 2e-3}}}

# name, scheduler block, optimizer override
SCHEDULES = [
    ("WarmupLR-log", {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-5, "warmup_max_lr": 2e-3,
                                                     "warmup_num_steps": 5}}, None),
    ("WarmupLR-linear-no-max", {"type": "WarmupLR", "params": {"warmup_num_steps": 4, "warmup_type": "linear"}},
     None),
    ("WarmupLR-defaults", {"type": "WarmupLR", "params": {}}, None),
    ("WarmupDecayLR-issue43", {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 2e-3,
                                                                  "warmup_num_steps": 5, "total_num_steps": 40}},
     None),
    ("WarmupDecayLR-short", {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-3,
                                                                "warmup_num_steps": 3, "total_num_steps": 9,
                                                                "warmup_type": "linear"}}, None),
    ("WarmupCosineLR", {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_num_steps": 3,
                                                            "warmup_min_ratio": 0.1, "cos_min_ratio": 0.05}},
     None),
    ("OneCycle", {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
                                                 "cycle_first_step_size": 3, "cycle_second_step_size": 4,
                                                 "decay_step_size": 2, "decay_lr_rate": 0.5,
                                                 "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
                                                 "decay_mom_rate": 0.02}}, None),
    ("OneCycle-stairs", {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
                                                        "cycle_first_step_size": 4, "cycle_first_stair_count": 2}},
     None),
    ("OneCycle-Adagrad", {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
                                                         "cycle_first_step_size": 3}},
     {"type": "Adagrad", "params": {"lr": 1e-2}}),
    ("LRRangeTest", {"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 3,
                                                       "lr_range_test_step_rate": 2.0}}, None),
    ("LRRangeTest-staircase", {"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-4,
                                                                 "lr_range_test_step_size": 3,
                                                                 "lr_range_test_step_rate": 2.0,
                                                                 "lr_range_test_staircase": True}}, None),
]
SKIPPED = {"WarmupLR-log", "WarmupDecayLR-short", "WarmupCosineLR", "OneCycle", "LRRangeTest"}
INF_STEPS = [2, 3, 8]
RESUMED = {"WarmupDecayLR-short": 6, "OneCycle": 5, "WarmupCosineLR": 4}


def config(sched, opt):
    c = json.loads(json.dumps(BASE))
    c["scheduler"] = sched
    if opt:
        c["optimizer"] = opt
    return c


def cases():
    """(name, zinc config, DeepSpeed config, inf steps, resume step)"""
    out = []
    for name, sched, opt in SCHEDULES:
        c = config(sched, opt)
        out.append((name + "/fp32", c, c, [], 0))
        if name in SKIPPED:
            z = dict(c, fp16={"enabled": True})
            d = dict(c, bf16={"enabled": True}, zero_optimization={"stage": 1})
            out.append((name + "/skipped", z, d, INF_STEPS, 0))
        if name in RESUMED:
            z = dict(c, fp16={"enabled": True})
            d = dict(c, bf16={"enabled": True}, zero_optimization={"stage": 1})
            out.append((name + "/resumed", z, d, [3], RESUMED[name]))
    return out


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600)
    return p.returncode, p.stdout


def zinc_lrs(a, name, cfg, inf, resume_at):
    """zinc's lrs (the resumed run's two halves joined) and skipped-step count."""
    d = os.path.join(a.workdir, name.replace("/", "_"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "ds_config.json")
    json.dump(cfg, open(path, "w"))
    env = dict(os.environ, ZINC_TEST_INF_GRAD_STEPS=",".join(str(s) for s in inf))
    base = [a.zinc, "train", "--quiet", "--threads", "1", "--config", path]
    lrs, skipped = [], 0
    legs = [(resume_at, ["--save", os.path.join(d, "ck")]), (STEPS, ["--resume", os.path.join(d, "ck")])] \
        if resume_at else [(STEPS, [])]
    for i, (steps, extra) in enumerate(legs):
        rep = os.path.join(d, f"report{i}.json")
        rc, out = run(base + ["--steps", str(steps), "--report", rep] + extra, env)
        if not check(rc == 0, f"{name}: zinc train exited {rc}:\n{out[-2000:]}"):
            return None, None
        r = json.load(open(rep))
        lrs += r["lrs"]
        skipped = r["steps_skipped"]
    return lrs, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True, help="the zinc program built with the test hooks")
    ap.add_argument("--python", default=sys.executable, help="a Python with deepspeed 0.19.8 and torch")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    a.python = os.environ.get("ZINC_DS_PYTHON") or a.python
    rc, out = run([a.python, "-c", "import torch, deepspeed; print(deepspeed.__version__)"],
                  dict(os.environ, DS_ACCELERATOR="cpu"))
    if rc != 0:
        print(f"SKIP: {a.python} cannot import deepspeed and torch (pip install deepspeed==0.19.8 torch into it, or "
              f"set ZINC_DS_PYTHON): {out.strip().splitlines()[-1] if out.strip() else rc}")
        return 77
    version = out.strip().splitlines()[-1]
    if version != "0.19.8":
        print(f"note: DeepSpeed {version}, the test's values are those of 0.19.8")
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    all_cases = cases()
    ds_in = [{"config": d, "steps": STEPS, "inf_steps": inf, "resume_at": r} for _, _, d, inf, r in all_cases]
    cases_path, results_path = os.path.join(a.workdir, "cases.json"), os.path.join(a.workdir, "ds_results.json")
    json.dump(ds_in, open(cases_path, "w"))
    here = os.path.dirname(os.path.abspath(__file__))
    rc, out = run([a.python, os.path.join(here, "ds_lr_reference.py"), "--cases", cases_path, "--out", results_path,
                   "--workdir", a.workdir])
    if rc == 77:
        print("SKIP:", out.strip().splitlines()[-1])
        return 77
    if not check(rc == 0, f"DeepSpeed reference run failed ({rc}):\n{out[-3000:]}"):
        return 1
    ds = json.load(open(results_path))
    for (name, z, _, inf, resume_at), want in zip(all_cases, ds):
        lrs, skipped = zinc_lrs(a, name, z, inf, resume_at)
        if lrs is None:
            continue
        check(lrs == want["lrs"], f"{name}: zinc lrs {lrs}\n  DeepSpeed {want['lrs']}")
        check(skipped == want["skipped"][-1],
              f"{name}: zinc skipped {skipped} steps, DeepSpeed {want['skipped'][-1]} ({want['skipped']})")
        if inf:
            check(skipped == len(inf), f"{name}: {skipped} steps skipped, want {len(inf)}")
        # a skipped step does not move the schedule: the step after it has the skipped step's lr
        for s in inf:
            if s < STEPS:
                check(want["lrs"][s] == want["lrs"][s - 1], f"{name}: DeepSpeed moved its schedule at skipped step {s}")
    print(f"{len(all_cases)} runs compared with DeepSpeed {version}, {STEPS} steps each")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
