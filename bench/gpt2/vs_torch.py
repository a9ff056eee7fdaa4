#!/usr/bin/env python3
"""Driver of bench/gpt2/vs_torch.sh (run that): zinc's GPT-2 and the PyTorch reference (torch_gpt2.py)
interleaved, per round every (shape, threads, dtype) cell once for each program, each round after waiting
for a quiet machine. Prints the machine, OpenBLAS's core, each run, then a markdown table of medians.

--cpu-steps S1,S2 adds, for the 1-thread cells, each program's CPU seconds (user + system) per training step,
from runs of S1 and S2 steps ((cpu2 - cpu1) / (S2 - S1): start-up, imports and the end of the run cancel),
as tokens per CPU second. On a shared machine, where wall-clock tokens/s follow the other jobs' bursts, a
one-thread program's own CPU time mostly does not (what remains is cache and memory contention, seen alike
by both programs run back to back)."""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {  # name: layers, channels, heads, vocab, context, batch
    "readme": (4, 128, 4, 256, 64, 16),
    "124M": (12, 768, 12, 50257, 64, 4),
}


def load1():
    return float(open("/proc/loadavg").read().split()[0])


def wait_quiet(limit, max_wait):
    t0 = time.time()
    while load1() >= limit and time.time() - t0 < max_wait:
        time.sleep(5)
    return load1()


def timed(cmd, env, work):
    """Runs cmd under /usr/bin/time; returns (stdout, peak RSS MiB); the CPU seconds go to timed.cpu."""
    tf = os.path.join(work, "time.txt")
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", tf] + cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    rss, user, system = open(tf).read().split()[-3:]
    timed.cpu = float(user) + float(system)
    return p.stdout, int(rss) / 1024


def run_zinc(a, shape, threads, dtype, steps, work):
    L, C, H, V, T, B = SHAPES[shape]
    cfg = {"train_batch_size": B, "train_micro_batch_size_per_gpu": B, "steps_per_print": 0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                     "weight_decay": 0.1}},
           "gradient_clipping": 1.0, "zero_optimization": {"stage": 0}}
    if dtype == "bf16":  # DeepSpeed's bf16: bf16 weights and gradients, bf16 products
        cfg["bf16"] = {"enabled": True}
    cpath, rep = os.path.join(work, "c.json"), os.path.join(work, "r.json")
    json.dump(cfg, open(cpath, "w"))
    cmd = [a.zinc, "train", "--model", "gpt2", "--quiet", "--config", cpath, "--layers", str(L), "--width", str(C),
           "--heads", str(H), "--vocab", str(V), "--context", str(T), "--data", a.data, "--steps", str(steps),
           "--seed", "7", "--threads", str(threads), "--sample-tokens", "1", "--report", rep, "--force", "--gemm", a.gemm]
    if dtype == "amp":  # torch autocast's scheme: fp32 weights and gradients, bf16 products
        cmd += ["--products", "bf16"]
    _, rss = timed(cmd, dict(os.environ), work)
    r = json.load(open(rep))
    a.gemm_ran = r.get("gemm", "?")
    return r["tokens_per_s"], r["losses"], rss


def run_torch(a, shape, threads, dtype, steps, work):
    L, C, H, V, T, B = SHAPES[shape]
    cmd = [a.python, os.path.join(HERE, "torch_gpt2.py"), "--layers", str(L), "--width", str(C), "--heads", str(H),
           "--vocab", str(V), "--context", str(T), "--batch", str(B), "--steps", str(steps), "--threads",
           str(threads), "--dtype", "bf16" if dtype == "amp" else dtype, "--data", a.data]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out, rss = timed(cmd, env, work)
    r = json.loads(out.strip().splitlines()[-1])
    return r["tokens_per_s"], r["losses"], rss, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps-readme", type=int, default=20)
    ap.add_argument("--steps-124m", type=int, default=6)
    ap.add_argument("--shapes", default="readme,124M")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="fp32,bf16,amp",
                    help="fp32; bf16 (zinc: bf16 config; torch: autocast); amp (zinc: fp32 config, --products "
                    "bf16; torch: autocast)")
    ap.add_argument("--quiet-load", type=float, default=1.2)
    ap.add_argument("--max-wait", type=float, default=300)
    ap.add_argument("--gemm", default="auto", help="zinc train --gemm: auto, openblas or onednn")
    ap.add_argument("--cpu-steps", default="", help="S1,S2: also CPU seconds per step of the 1-thread cells, "
                    "from runs of S1 and S2 steps")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    a.data = os.path.join(a.work, "tok.bin")
    d = b"".join(open("/usr/share/common-licenses/" + f, "rb").read() for f in ("GPL-3", "GPL-2", "Apache-2.0"))
    with open(a.data, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(d)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(d), *d))

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    core = subprocess.run([a.zinc, "--version"], env=dict(os.environ, OPENBLAS_VERBOSE="2"), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True).stdout
    core = next((l.strip() for l in core.splitlines() if "Core" in l), "? (OPENBLAS_VERBOSE=2 printed no core)")
    print(f"== machine: {os.cpu_count()} cores, {cpu}; {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC")
    print(f"== OpenBLAS (zinc): {core}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    user = [x for i, x in enumerate(sys.argv[1:]) if x not in ("--zinc", "--python", "--work")
            and (i == 0 or sys.argv[i] not in ("--zinc", "--python", "--work"))]
    print(f"== command: bench/gpt2/vs_torch.sh {' '.join(user)}")
    print("== zinc: stage 0, micro batch = batch, AdamW, clipping 1.0, tokens/s of the report (all steps); torch: "
          "nanoGPT-style module, fused AdamW, tokens/s over the steps after the first", flush=True)

    cells = [(s, int(t), dt) for s in a.shapes.split(",") for t in a.threads.split(",") for dt in a.dtypes.split(",")]
    res = {}
    for rnd in range(a.rounds):
        ld = wait_quiet(a.quiet_load, a.max_wait)
        print(f"-- round {rnd + 1}: load {ld:.2f}{' (UNDER LOAD)' if ld >= a.quiet_load else ''}", flush=True)
        for s, t, dt in cells:
            steps = a.steps_readme if s == "readme" else a.steps_124m
            zt, zl, zr = run_zinc(a, s, t, dt, steps, a.work)
            tt, tl, tr, info = run_torch(a, s, t, dt, steps, a.work)
            e = res.setdefault((s, t, dt), {"z": [], "t": [], "zl": zl, "tl": tl, "zr": 0, "tr": 0, "load": []})
            e["z"].append(zt), e["t"].append(tt), e["load"].append(ld)
            e["zr"], e["tr"] = max(e["zr"], zr), max(e["tr"], tr)
            print(f"{s:6} {t} thr {dt}: zinc {zt:9.1f} tok/s ({zr:6.0f} MiB)  torch {tt:9.1f} tok/s ({tr:6.0f} MiB)  "
                  f"ratio {zt / tt:5.2f}  losses zinc {zl[-1]:.4f} torch {tl[-1]:.4f}", flush=True)
            if a.cpu_steps and t == 1:
                s1, s2 = (int(x) for x in a.cpu_steps.split(","))
                L, C, H, V, T, B = SHAPES[s]
                per = {}
                for name, fn in (("zinc", run_zinc), ("torch", run_torch)):
                    fn(a, s, t, dt, s1, a.work)
                    c1 = timed.cpu
                    fn(a, s, t, dt, s2, a.work)
                    per[name] = (timed.cpu - c1) / (s2 - s1)
                zc, tc = B * T / per["zinc"], B * T / per["torch"]
                e.setdefault("zc", []).append(zc), e.setdefault("tc", []).append(tc)
                print(f"{s:6} {t} thr {dt}: CPU time: zinc {per['zinc'] * 1e3:8.2f} ms/step ({zc:9.1f} tok per CPU s)  "
                      f"torch {per['torch'] * 1e3:8.2f} ms/step ({tc:9.1f})  ratio {zc / tc:5.2f}", flush=True)
    print(f"== torch {info['torch']} ({info['cpu_capability']}); zinc's products: {a.gemm_ran} (--gemm {a.gemm})")
    print("\n| shape | threads | dtype | zinc tok/s | torch tok/s | zinc / torch | peak RSS zinc / torch MiB | "
          "bf16 loss vs fp32, rel. max, median (zinc / torch) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (s, t, dt), e in res.items():
        z, tt = statistics.median(e["z"]), statistics.median(e["t"])
        close = ""
        if dt in ("bf16", "amp") and (s, t, "fp32") in res:
            f = res[(s, t, "fp32")]
            # per step |bf16 - fp32| / fp32; the max alone follows any loss spike of an unstable early step
            # (where both runs' small differences are amplified), so the median is printed beside it
            rel = lambda x, y: [abs(p - q) / abs(q) for p, q in zip(x, y)]
            zr, tr = rel(e["zl"], f["zl"]), rel(e["tl"], f["tl"])
            close = (f"{max(zr):.1e}, {statistics.median(zr):.1e} / "
                     f"{max(tr):.1e}, {statistics.median(tr):.1e}")
        print(f"| {s} | {t} | {dt} | {z:,.0f} | {tt:,.0f} | {z / tt:.2f}x | {e['zr']:,.0f} / {e['tr']:,.0f} | {close} | "
              f"{max(e['load']):.1f} |")
    if a.cpu_steps:
        print(f"\nCPU time per step (--cpu-steps {a.cpu_steps}), 1 thread, medians and each round's zinc / torch:\n")
        print("| shape | dtype | zinc tokens per CPU s | torch tokens per CPU s | zinc / torch | rounds |")
        print("|---|---|---|---|---|---|")
        for (s, t, dt), e in res.items():
            if "zc" in e:
                zc, tc = statistics.median(e["zc"]), statistics.median(e["tc"])
                rr = ", ".join(f"{p / q:.2f}" for p, q in zip(e["zc"], e["tc"]))
                print(f"| {s} | {dt} | {zc:,.0f} | {tc:,.0f} | {zc / tc:.2f}x | {rr} |")


if __name__ == "__main__":
    main()
