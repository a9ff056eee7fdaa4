#!/usr/bin/env python3
"""wall_clock_breakdown and the extra monitor scalars through `zinc train` (issue 43), standard library only:
  - with wall_clock_breakdown, rank 0 logs DeepSpeed's lines (deepspeed/utils/timer.py format): one
    "time (ms) | fwd_microstep: ... | step_microstep: ..." per micro-step and one "time (ms) | fwd: ... | bwd:
    ... | bwd_inner: ... | bwd_allreduce: ... | step: ..." per optimizer step, the step's micro-steps summed;
    and csv_monitor gets DeepSpeed's five Train/Samples/elapsed_time_ms_* files, one row per step at the
    samples seen after it, equal to the logged figures (2 decimals), bwd = bwd_inner + bwd_allreduce;
    at 2 ranks (ZeRO 2) the reductions show in bwd_allreduce;
  - Train/Samples/grad_norm (a row per taken step, none for a skipped one, the last equal to --report's),
    samples_per_second, and, for GPT-2 (which declares its FLOPs), flops_per_second and eval_loss (the
    validation losses of --report);
  - without wall_clock_breakdown no timer line and no elapsed_time file; --quiet prints no timer line and no
    GPT-2 progress or validation line."""
import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import checks
from checks import check

MICRO = re.compile(r"time \(ms\) \| fwd_microstep: ([\d.]+) \| bwd_microstep: ([\d.]+) \| bwd_inner_microstep: "
                   r"([\d.]+) \| bwd_allreduce_microstep: ([\d.]+) \| step_microstep: ([\d.]+)$")
GLOBAL = re.compile(r"time \(ms\) \| fwd: ([\d.]+) \| bwd: ([\d.]+) \| bwd_inner: ([\d.]+) \| bwd_allreduce: "
                    r"([\d.]+) \| step: ([\d.]+)$")
TAGS = ["forward", "backward", "backward_inner", "backward_allreduce", "step"]


def run(cmd, env=None, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    check(p.returncode == expect, f"{' '.join(cmd)}: exit {p.returncode}, want {expect}\n{p.stdout[-2000:]}")
    return p.stdout


def rows(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        r = list(csv.reader(f))
    return [(int(a), float(b)) for a, b in r[1:]]


def config(d, job, wcb, batch=8, gas=2, extra=None):
    c = {"train_batch_size": batch, "gradient_accumulation_steps": gas, "wall_clock_breakdown": wcb,
         "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}, "fp16": {"enabled": True},
         "csv_monitor": {"enabled": True, "output_path": os.path.join(d, "mon"), "job_name": job}}
    c.update(extra or {})
    path = os.path.join(d, job + ".json")
    json.dump(c, open(path, "w"))
    return path, os.path.join(d, "mon", job)


def check_breakdown(name, out, mon, steps, gas, batch, ranks=1):
    micro = [tuple(map(float, m.groups())) for m in map(MICRO.search, out.splitlines()) if m]
    glob = [tuple(map(float, m.groups())) for m in map(GLOBAL.search, out.splitlines()) if m]
    check(len(micro) == steps * gas, f"{name}: {len(micro)} micro-step lines, want {steps * gas}")
    check(len(glob) == steps, f"{name}: {len(glob)} step lines, want {steps}")
    files = {t: rows(os.path.join(mon, f"Train_Samples_elapsed_time_ms_{t}.csv")) for t in TAGS}
    for t, r in files.items():
        if not check(r is not None and len(r) == steps, f"{name}: elapsed_time_ms_{t}: {r}"):
            return
        check([x for x, _ in r] == [(k + 1) * batch for k in range(steps)], f"{name}: {t} x axis {r}")
    for k in range(min(steps, len(glob))):
        vals = [files[t][k][1] for t in TAGS]
        for i, t in enumerate(TAGS):
            check(abs(vals[i] - glob[k][i]) <= 0.0051, f"{name} step {k + 1}: {t} file {vals[i]} vs logged {glob[k][i]}")
        check(vals[0] > 0 and vals[1] > 0 and vals[4] > 0, f"{name} step {k + 1}: zero times {vals}")
        check(abs(vals[1] - vals[2] - vals[3]) < 1e-6, f"{name} step {k + 1}: bwd != inner + allreduce {vals}")
        # the step's figures sum its micro-steps (each printed with 2 decimals)
        ms = micro[k * gas:(k + 1) * gas]
        for i in range(4):
            check(abs(sum(m[i] for m in ms) - glob[k][i]) <= 0.0051 * (gas + 1),
                  f"{name} step {k + 1}: micro-steps {ms} do not sum to {glob[k]}")
    if ranks > 1:
        check(sum(r for _, r in files["backward_allreduce"]) > 0, f"{name}: no reduction time at {ranks} ranks")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True, help="the zinc program built with the test hooks")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    a = ap.parse_args()
    d = a.workdir
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    z = [a.zinc, "train", "--threads", "1"]
    steps, gas, batch = 5, 2, 8

    # 1 rank, MLP, fp16 with step 3 skipped (inf gradient): timers, grad_norm, samples/s
    cfg, mon = config(d, "mlp", True)
    rep = os.path.join(d, "mlp_report.json")
    env = dict(os.environ, ZINC_TEST_INF_GRAD_STEPS="3")
    out = run(z + ["--config", cfg, "--steps", str(steps), "--report", rep], env)
    check_breakdown("mlp", out, mon, steps, gas, batch)
    r = json.load(open(rep))
    gn = rows(os.path.join(mon, "Train_Samples_grad_norm.csv"))
    check(gn is not None and [x for x, _ in gn] == [k * batch for k in (1, 2, 4, 5)],
          f"mlp: grad_norm rows {gn} (step 3 skipped: none)")
    if gn:
        check(abs(gn[-1][1] - r["final_grad_norm"]) <= 1e-12 * max(1, r["final_grad_norm"]),
              f"mlp: last grad_norm {gn[-1][1]} vs report {r['final_grad_norm']}")
    sps = rows(os.path.join(mon, "Train_Samples_samples_per_second.csv"))
    check(sps is not None and len(sps) == steps and all(v > 0 for _, v in sps), f"mlp: samples_per_second {sps}")

    # 2 ranks, ZeRO 2: the reductions are bwd_allreduce
    cfg2, mon2 = config(d, "mlp2", True, gas=1, extra={"zero_optimization": {"stage": 2}})
    out = run(shlex.split(a.mpirun) + ["-np", "2"] + z + ["--config", cfg2, "--steps", "3"])
    check_breakdown("mlp np2", out, mon2, 3, 1, batch, ranks=2)

    # off: no line, no file; --quiet: no line
    cfg3, mon3 = config(d, "off", False)
    out = run(z + ["--config", cfg3, "--steps", "2"])
    check(not MICRO.search(out) and not GLOBAL.search(out), f"off: timer lines printed:\n{out}")
    check(not os.path.exists(os.path.join(mon3, "Train_Samples_elapsed_time_ms_step.csv")), "off: elapsed file")
    cfg4, _ = config(d, "quiet", True)
    out = run(z + ["--config", cfg4, "--steps", "2", "--quiet"])
    check("time (ms)" not in out, f"--quiet: timer lines printed:\n{out}")

    # GPT-2: flops_per_second, eval_loss; --quiet prints no progress or validation line
    text = os.path.join(d, "t.txt")
    with open(text, "w") as f:
        f.write("".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(6000)))
    cfg5, mon5 = config(d, "gpt2", False, batch=4, gas=1)
    rep5 = os.path.join(d, "gpt2_report.json")
    g = z + ["--model", "gpt2", "--text", text, "--layers", "2", "--width", "16", "--heads", "2", "--context", "8",
             "--config", cfg5, "--steps", "4", "--val-every", "2", "--val-batches", "1", "--report", rep5]
    out = run(g + ["--quiet"])
    check(not re.search(r"^step +\d", out, re.M), f"gpt2 --quiet printed progress lines:\n{out}")
    r5 = json.load(open(rep5))
    ev = rows(os.path.join(mon5, "Train_Samples_eval_loss.csv"))
    want = [(v["step"] * 4, v["loss"]) for v in r5.get("val_losses", [])]
    check(ev is not None and len(want) == 2 and [x for x, _ in ev] == [x for x, _ in want] and
          all(abs(a - b) <= 1e-6 * abs(b) for (_, a), (_, b) in zip(ev, want)), f"gpt2: eval_loss {ev} vs {want}")
    fl = rows(os.path.join(mon5, "Train_Samples_flops_per_second.csv"))
    check(fl is not None and len(fl) == 4 and all(v > 0 for _, v in fl), f"gpt2: flops_per_second {fl}")
    out = run([x for x in g if x != "--report" and x != rep5])
    check(re.search(r"^step +\d", out, re.M) is not None, f"gpt2 without --quiet printed no progress line:\n{out}")

    # MFU: --peak-flops sgemm calibrates the products' own backend (the report names it); an MFU above 100% is
    # marked on every progress line and warned about once
    cfg6, _ = config(d, "mfu", False, batch=4, gas=1)
    base = z + ["--model", "gpt2", "--text", text, "--layers", "1", "--width", "16", "--heads", "2", "--context", "8",
                "--config", cfg6, "--steps", "2"]
    for gemm, name in (("openblas", "OpenBLAS sgemm"), ("onednn", "oneDNN sgemm")):
        rep6 = os.path.join(d, f"mfu_{gemm}.json")
        p = subprocess.run(base + ["--gemm", gemm, "--peak-flops", "sgemm", "--report", rep6, "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        if gemm == "onednn" and p.returncode != 0 and "libdnnl" in p.stdout:
            print("note: oneDNN does not load here; its calibration is not checked")
            continue
        check(p.returncode == 0, f"mfu {gemm}: exit {p.returncode}\n{p.stdout[-1500:]}")
        if p.returncode == 0:
            r6 = json.load(open(rep6))
            check(r6.get("peak_backend") == name and r6.get("peak_source") == "sgemm",
                  f"mfu {gemm}: peak_backend {r6.get('peak_backend')!r}, want {name!r}")
            check(r6.get("mfu_above_peak") == (r6.get("mfu", 0) > 1), f"mfu {gemm}: mfu_above_peak {r6}")
        # at the README's shape the products dominate the step: the run's MFU against the calibration of the
        # backend in use stays at most 100% (a peak taken on another backend, or averaged over the first
        # product's JIT and a slow stretch of a shared machine, gave 103.8-120%)
        rep8 = os.path.join(d, f"mfu_readme_{gemm}.json")
        readme = list(base)
        for k, v in (("--layers", "4"), ("--width", "128"), ("--heads", "4"), ("--context", "64"), ("--steps", "8")):
            readme[readme.index(k) + 1] = v
        p = subprocess.run(readme + ["--gemm", gemm, "--peak-flops", "sgemm", "--report", rep8, "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        check(p.returncode == 0, f"mfu readme {gemm}: exit {p.returncode}\n{p.stdout[-1500:]}")
        if p.returncode == 0:
            r8 = json.load(open(rep8))
            check(0 < r8.get("mfu", 0) <= 1 and "warning: MFU" not in p.stdout,
                  f"mfu readme {gemm}: MFU {r8.get('mfu')} (peak {r8.get('peak_flops_per_s')}, achieved "
                  f"{r8.get('flops_per_s')})\n{p.stdout[-800:]}")
    rep7 = os.path.join(d, "mfu_low.json")
    out = run(base + ["--peak-flops", "1e3", "--report", rep7])
    lines = [l for l in out.splitlines() if "MFU" in l and l.startswith("step")]
    check(lines and all("(above peak)" in l for l in lines), f"MFU above 100% not marked: {lines}")
    check(out.count("warning: MFU") == 1 and "given by --peak-flops" in out, f"MFU warning not given once:\n{out}")
    check(json.load(open(rep7)).get("mfu_above_peak") is True, "report: mfu_above_peak not true")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
