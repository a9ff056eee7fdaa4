#!/usr/bin/env python3
"""DeepSpeed's tensorboard and csv_monitor blocks through `zinc train` (docs/monitors.md), read back by the
`tensorboard` package's own reader (EventAccumulator, which checks every record's CRCs) and Python's csv:

  values:  the MLP and GPT-2 at fp32 and fp16 (stage 2; GPT-2 fp16 at stage 0, the MLP at 2 ranks, and at
           stage 3 with the optimizer state offloaded to CPU at 2 ranks): Train/Samples/train_loss at
           samples k*B equals the --report's losses[k] (float32 in the event file, exactly in the CSV),
           Train/Samples/lr at (k+1)*B the lr step k+1 uses (lrs[k+1]; the last one from WarmupLR's
           formula), Train/Samples/loss_scale (fp16 only) at (k+1)*B loss_scales[k]; CSV headers
           "step,<tag's last part>", CRLF lines, values printed as Python's repr; one event file per run;
  resume:  a run resumed from its checkpoint adds an event file and continues the CSV files;
  errors:  output_path a file, the job directory a link, a foreign CSV file where one goes, bad key values
           (exit 1, the key or path named); wandb and comet: a warning that zinc uses no network service.

Exit 0 pass, 1 fail, 77 when the tensorboard package cannot be imported (scripts/test.sh installs it into
build/pyenv)."""
import argparse
import csv
import glob
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys

import checks
from checks import check

B = 16          # train_batch_size
W = 100         # WarmupLR warmup_num_steps
MAX_LR = 0.003


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def config(path, out, fp16, job="job", extra=None, zero=None):
    c = {"train_batch_size": B, "train_micro_batch_size_per_gpu": 4,
         "optimizer": {"type": "AdamW", "params": {"lr": MAX_LR, "weight_decay": 0.01}},
         "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": MAX_LR,
                                                      "warmup_num_steps": W, "warmup_type": "linear"}},
         "zero_optimization": zero or {"stage": 2},
         "tensorboard": {"enabled": True, "output_path": out, "job_name": job},
         "csv_monitor": {"enabled": True, "output_path": out, "job_name": job}}
    if fp16:
        c["fp16"] = {"enabled": True, "initial_scale_power": 12}
    c.update(extra or {})
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if not check(p.returncode == expect, f"exit {p.returncode}, expected {expect}: {shlex.join(cmd)}"):
        print(p.stdout[-3000:])
    return p.stdout


def scalars(job_dir):
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(job_dir, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def csv_rows(path, column):
    raw = open(path, "rb").read()
    check(raw.count(b"\r\n") == raw.count(b"\n") and raw.endswith(b"\r\n"), f"{path}: CRLF line ends")
    rows = list(csv.reader(raw.decode().splitlines()))
    check(rows and rows[0] == ["step", column], f"{path}: header {rows[:1]}")
    return rows[1:]


def verify(name, job_dir, rep, fp16, start=0):
    """The files of job_dir against the report of a run of len(losses) steps from step `start`."""
    if not check(all(k in rep for k in ("losses", "lrs", "loss_scales")), f"{name}: the report lacks per-step keys"):
        return
    losses, lrs, scales = rep["losses"], rep["lrs"], rep["loss_scales"]
    n = len(losses)
    check(n == rep["steps"] - start and len(lrs) == n and len(scales) == n, f"{name}: {n} losses in the report")
    tb = scalars(job_dir)
    want = {"Train/Samples/train_loss", "Train/Samples/lr"} | ({"Train/Samples/loss_scale"} if fp16 else set())
    # issue 43's scalars (test_wallclock.py checks their values): the gradient norm and throughput at every
    # taken step, FLOP/s when the model declares its FLOPs, eval_loss when it validates
    want |= {"Train/Samples/grad_norm", "Train/Samples/samples_per_second"}
    want |= {"Train/Samples/flops_per_second"} if rep.get("flops_per_sample") else set()
    want |= {"Train/Samples/eval_loss"} if rep.get("val_losses") else set()
    check(set(tb) == want, f"{name}: tags {sorted(tb)}, want {sorted(want)}")
    check(len(tb.get("Train/Samples/grad_norm", [])) >= rep["steps_taken"] - start - rep["steps_skipped"],
          f"{name}: {len(tb.get('Train/Samples/grad_norm', []))} grad_norm scalars")
    loss = tb.get("Train/Samples/train_loss", [])[-n:]
    lr = tb.get("Train/Samples/lr", [])[-n:]
    check([s for s, _ in loss] == [(start + k) * B for k in range(n)], f"{name}: train_loss x axis {loss}")
    check([v for _, v in loss] == [f32(x) for x in losses], f"{name}: train_loss {loss} vs {losses}")
    next_lr = lrs[1:] + [0.0 + MAX_LR * ((rep["steps_taken"] - 1) / W)]  # WarmupLR linear: it = steps_taken - 1
    check([s for s, _ in lr] == [(start + k + 1) * B for k in range(n)], f"{name}: lr x axis {lr}")
    check([v for _, v in lr] == [f32(x) for x in next_lr], f"{name}: lr {lr} vs {next_lr}")
    rows = csv_rows(os.path.join(job_dir, "Train_Samples_train_loss.csv"), "train_loss")[-n:]
    check(rows == [[str((start + k) * B), repr(x)] for k, x in enumerate(losses)], f"{name}: loss CSV {rows}")
    rows = csv_rows(os.path.join(job_dir, "Train_Samples_lr.csv"), "lr")[-n:]
    check([int(s) for s, _ in rows] == [(start + k + 1) * B for k in range(n)] and
          [float(v) for _, v in rows[:-1]] == lrs[1:] and abs(float(rows[-1][1]) - next_lr[-1]) <= 1e-15,
          f"{name}: lr CSV {rows} vs {next_lr}")
    if fp16:
        sc = tb.get("Train/Samples/loss_scale", [])[-n:]
        check(sc == [((start + k + 1) * B, f32(x)) for k, x in enumerate(scales)], f"{name}: loss_scale {sc}")
        rows = csv_rows(os.path.join(job_dir, "Train_Samples_loss_scale.csv"), "loss_scale")[-n:]
        check(rows == [[str((start + k + 1) * B), repr(float(x))] for k, x in enumerate(scales)],
              f"{name}: loss_scale CSV {rows}")
    else:
        check(not os.path.exists(os.path.join(job_dir, "Train_Samples_loss_scale.csv")), f"{name}: no scale CSV")


def train_cases(z, work, text, mpirun):
    gpt2 = ["--model", "gpt2", "--text", text, "--layers", "1", "--width", "16", "--heads", "2", "--context", "8"]
    z3_offload = {"stage": 3, "offload_optimizer": {"device": "cpu"}}
    for name, model, fp16, ranks, zero in [("mlp_fp32", [], False, 1, None), ("mlp_fp16", [], True, 1, None),
                                           ("gpt2_fp32", gpt2, False, 1, None), ("gpt2_fp16", gpt2, True, 1, None),
                                           ("mlp_fp16_np2", [], True, 2, None),
                                           ("gpt2_fp16_z0", gpt2, True, 1, {"stage": 0}),
                                           ("mlp_fp32_z3_offload_np2", [], False, 2, z3_offload)]:
        out = os.path.join(work, name)
        cfg = config(os.path.join(work, name + ".json"), out, fp16, zero=zero)
        rep_path = os.path.join(work, name + ".report.json")
        cmd = [z, "train", "--config", cfg, "--steps", "6", "--threads", "1", "--quiet", "--report", rep_path] + model
        run((mpirun + ["-np", str(ranks)] if ranks > 1 else []) + cmd)
        if not os.path.exists(rep_path):
            continue
        rep = json.load(open(rep_path))
        job = os.path.join(out, "job")
        check(len(glob.glob(os.path.join(job, "events.out.tfevents.*"))) == 1, f"{name}: one event file (rank 0)")
        verify(name, job, rep, fp16)


def resume_case(z, work):
    out, ck = os.path.join(work, "resume"), os.path.join(work, "resume_ckpt")
    cfg = config(os.path.join(work, "resume.json"), out, True)
    base = [z, "train", "--config", cfg, "--threads", "1", "--quiet"]
    run(base + ["--steps", "3", "--save", ck])
    rep_path = os.path.join(work, "resume.report.json")
    run(base + ["--steps", "6", "--resume", ck, "--report", rep_path])
    job = os.path.join(out, "job")
    check(len(glob.glob(os.path.join(job, "events.out.tfevents.*"))) == 2, "resume: a second event file")
    rows = csv_rows(os.path.join(job, "Train_Samples_train_loss.csv"), "train_loss")
    check([int(r[0]) for r in rows] == [k * B for k in range(6)], f"resume: one CSV continued: {rows}")
    if os.path.exists(rep_path):
        verify("resume", job, json.load(open(rep_path)), True, start=3)
        check(len(scalars(job).get("Train/Samples/train_loss", [])) == 6, "resume: 6 losses over both event files")


def error_cases(z, work):
    def refused(name, needles, extra=None, job="job", out=None):
        cfg = config(os.path.join(work, name + ".json"), out or os.path.join(work, name), False, job, extra)
        err = run([z, "train", "--config", cfg, "--steps", "1", "--threads", "1", "--quiet"], expect=1)
        for n in needles:
            check(n in err, f"{name}: message lacks {n!r}: {err[-600:]!r}")

    plain = os.path.join(work, "plain_file")
    open(plain, "w").close()
    refused("out_is_file", ["tensorboard.output_path", "is not a directory"], out=plain)
    os.makedirs(os.path.join(work, "linkjob"), exist_ok=True)
    os.symlink(work, os.path.join(work, "linkjob", "job"))
    refused("linkjob", ["tensorboard.job_name", "is a symbolic link: refused"])
    foreign = os.path.join(work, "foreign", "job")
    os.makedirs(foreign)
    open(os.path.join(foreign, "Train_Samples_lr.csv"), "w").write("a,b\n1,2\n")
    refused("foreign", ["csv_monitor", "Train_Samples_lr.csv", "does not start with the line \"step,lr\""])
    check(open(os.path.join(foreign, "Train_Samples_lr.csv")).read() == "a,b\n1,2\n", "foreign CSV untouched")
    check(os.listdir(foreign) == ["Train_Samples_lr.csv"], f"a refused open leaves nothing: {os.listdir(foreign)}")
    refused("bad_enabled", ["tensorboard.enabled", "true or false"], {"tensorboard": {"enabled": "yes"}})
    refused("abs_job", ["csv_monitor.job_name", "absolute path"], job="/abs")
    refused("bad_key", ["tensorboard", "output_pat"], {"tensorboard": {"enabled": True, "output_pat": "x"}})
    for block in ("wandb", "comet"):
        cfg = config(os.path.join(work, block + ".json"), os.path.join(work, block), False,
                     extra={block: {"enabled": True}})
        err = run([z, "train", "--config", cfg, "--steps", "1", "--threads", "1"])
        check(f"{block}: ignored" in err and "network service" in err and "tensorboard and csv_monitor" in err,
              f"{block}: the warning says why and what to use: {err[-600:]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="mpirun --oversubscribe --allow-run-as-root")
    a = ap.parse_args()
    try:
        from tensorboard.backend.event_processing import event_accumulator  # noqa: F401
    except Exception as e:  # the only reason to skip: no reader to check the files with
        print(f"SKIP: the tensorboard package cannot be imported by {sys.executable} ({e}); scripts/test.sh "
              "installs it into build/pyenv (or set ZINC_PYTHON to a Python that has it)")
        return 77
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    text = os.path.join(work, "t.txt")
    open(text, "w").write("".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(6000)))
    train_cases(z, work, text, shlex.split(a.mpirun))
    resume_case(z, work)
    error_cases(z, work)
    print(f"{checks.failures} failure(s)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
