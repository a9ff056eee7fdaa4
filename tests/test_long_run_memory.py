#!/usr/bin/env python3
"""A long run's memory stays bounded (issue 43, item 6): the peak RSS (--report's vmhwm_bytes, each rank's
VmHWM) of a GPT-2 run of --long steps must stay within 10% of the same run's at --short steps, with what a
long run keeps doing: validation and a sample every 25 steps, fp16 with skipped steps, CSV monitors, 2 engine
threads. Small shape, many steps, so the test stays cheap (a few seconds). Standard library only.

Measured by the session that wrote it (2 shared cores, loaded): no growth at this shape over 6,000 steps;
the README-shape run (4x128, context 256) stayed at 90 MiB through 225 steps. The growth issue 43 reports
(53 MiB at step 10 to 405 MiB by step 18,010) was not reproduced; this test is the guard."""
import argparse
import json
import os
import shutil
import subprocess
import sys

import checks
from checks import check


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--short", type=int, default=100)
    ap.add_argument("--long", type=int, default=5000)
    a = ap.parse_args()
    d = a.workdir
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    text = os.path.join(d, "t.txt")
    with open(text, "w") as f:
        f.write("".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(20000)))
    peaks = {}
    for steps in (a.short, a.long):
        cfg = os.path.join(d, f"cfg{steps}.json")
        json.dump({"train_batch_size": 4, "steps_per_print": 25, "fp16": {"enabled": True, "loss_scale_window": 50},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2},
                   "csv_monitor": {"enabled": True, "output_path": os.path.join(d, "mon"), "job_name": f"j{steps}"}},
                  open(cfg, "w"))
        rep = os.path.join(d, f"report{steps}.json")
        cmd = [a.zinc, "train", "--model", "gpt2", "--quiet", "--threads", "2", "--config", cfg, "--text", text,
               "--layers", "1", "--width", "32", "--heads", "2", "--context", "16", "--steps", str(steps),
               "--val-batches", "1", "--sample-every", "25", "--sample-tokens", "8", "--report", rep]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if not check(p.returncode == 0, f"{steps} steps: exit {p.returncode}\n{p.stdout[-1500:]}"):
            return 1
        r = json.load(open(rep))
        hwm = r["vmhwm_bytes"]
        peaks[steps] = max(hwm) if isinstance(hwm, list) else hwm
        check(r["steps"] == steps, f"{steps} steps: the report says {r['steps']}")
    s, l = peaks[a.short], peaks[a.long]
    print(f"peak RSS: {s / 2**20:.1f} MiB after {a.short} steps, {l / 2**20:.1f} MiB after {a.long}")
    check(l <= 1.10 * s, f"peak RSS grew from {s / 2**20:.1f} MiB ({a.short} steps) to {l / 2**20:.1f} MiB "
                         f"({a.long} steps): more than 10%")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
