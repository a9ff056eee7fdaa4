#!/usr/bin/env python3
"""zinc trace summary|plot and zinc train's FLOP/s and MFU, end to end through the program (standard library).

  summary: the fixture traces in tests/trace_fixtures/ (written by hand to the trace contract,
           docs/profiling.md "The file"): two_ranks.json's per-rank phases, hidden and exposed
           communication, mean step, slowest rank and per-module FLOP/s equal the figures worked out by hand
           in the comments below (1e-9 relative); a file cut short, a trace of another tool, a future format,
           an event without dur, a pid outside world_size, a step without samples, a directory, a FIFO and a
           missing file each exit 1 with a message naming the problem; usage errors exit 2;
  plot:    (gnuplot installed, else skipped) a Gantt chart SVG with every phase of the fixture in its
           legend and one row label per rank and track; an existing --out refused without --force and
           replaced with it; the trace itself never replaced;
  flops:   the MLP's report: flops_per_sample = the count of its layers' matrix products, flops_per_s =
           flops_per_sample x samples / flops_train_seconds, MFU = flops_per_s / (--peak-flops x ranks) at 1
           and 2 ranks, --peak-flops sgemm measures a peak > 0, a bad --peak-flops exits 2; GPT-2's
           flops_per_sample equals an independent count of the matrix products' shapes (3 x the forward's
           2 M K N over qkv, Q K^T, P V, attproj, fc, fcproj and the tied head), and progress lines show
           FLOP/s and MFU;
  real:    traces that zinc train --trace writes: GPT-2 at 2 ranks, ZeRO 2, buckets of about one block: the
           summary has both ranks with their steps and samples, the modules embed, h0..h3, lnf with FLOPs
           = the model's declaration (otherData, equal to the report's flops_per_sample) x the samples;
           with overlap_comm part of the reduce-scatters is hidden behind backward compute, without it
           none; the MLP at 1 rank, whose run ends with the per-module table; the plot of a real trace names
           the ranks' tracks.
Exit 0 pass, 1 fail, 77 skipped (plot without gnuplot).
"""
import argparse
import json
import math
import os
import shlex
import shutil
import stat
import subprocess
import sys

import checks
from checks import check


def run(cmd, expect=0, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != expect:
        print("command:", " ".join(cmd))
        print(p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit {p.returncode}, expected {expect}: {' '.join(cmd[-8:])}")
    return p


def near(a, b, rel=1e-9):
    return a is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def expect_error(cmd, code, *needles):
    p = run(cmd, expect=code)
    for n in needles:
        check(n in p.stderr, f"message lacks {n!r}: {p.stderr.strip()[-400:]}")


def summary_part(z, fx, work):
    p = run([z, "trace", "summary", os.path.join(fx, "two_ranks.json"), "--json"])
    s = json.loads(p.stdout)
    check(s["world_size"] == 2 and len(s["ranks"]) == 2, "two ranks")
    # rank 0, per 10 ms step (2 steps): data 0.5, forward fc1 + fc2 4, backward 4 less the 0.5 wait nested in
    # fc1's, optimizer 1 on main and pool at once (counted once), engine 0.3, 0.2 in no span; the
    # reduce-scatter on the comm track 6..8.5 ms overlaps backward's self time 6..8 (hidden 2) and the wait
    # 8..8.5 (exposed 0.5). Rank 1 the same plus a 2 ms all-gather wait per step (12 ms steps).
    want0 = {"forward": 8, "backward": 7, "wait": 1, "optimizer": 2, "data": 1, "engine": 0.6, "comm": 5}
    for rank, want, step in ((0, want0, 10.0), (1, dict(want0, wait=5), 12.0)):
        r = s["ranks"][rank]
        check(r["steps"] == 2 and r["samples"] == 8, f"rank {rank} steps/samples {r['steps']} {r['samples']}")
        check(near(r["mean_step_ms"], step), f"rank {rank} mean step {r['mean_step_ms']}")
        for k, v in want.items():
            got = r["phases"][k]
            check(near(got["ms"], v) and near(got["pct"], 100 * v / (2 * step)), f"rank {rank} {k}: {got}")
        check(near(r["comm_hidden_ms"], 4) and near(r["comm_exposed_ms"], 1), f"rank {rank} comm split {r}")
        check(near(r["untracked_ms"], 0.4), f"rank {rank} untracked {r['untracked_ms']}")
        # 3000 FLOPs per sample x 8 samples over the steps' time
        check(near(r["flops_per_s"], 3000 * 8 / (2 * step / 1e3)), f"rank {rank} FLOP/s {r['flops_per_s']}")
    sl = s["slowest_rank"]
    check(sl["rank"] == 1 and sl["fastest_rank"] == 0 and near(sl["mean_step_ms"], 12), f"slowest {sl}")
    mods = {m["name"]: m for m in s["modules"]}
    check(list(mods) == ["fc1", "fc2"], f"modules {list(mods)}")
    # fc1: forward 2 ms x 2 steps x 2 ranks = 8 ms, backward (2 - 0.5) x 4 = 6 ms; 16 samples in all:
    # forward 500 x 16 FLOPs, backward 1000 x 16
    fc1 = mods["fc1"]
    check(near(fc1["forward_ms"], 8) and near(fc1["backward_ms"], 6), f"fc1 times {fc1}")
    check(near(fc1["forward_flops_per_s"], 8000 / 0.008) and near(fc1["backward_flops_per_s"], 16000 / 0.006),
          f"fc1 FLOP/s {fc1}")
    check(near(fc1["flops_per_s"], 24000 / 0.014), f"fc1 total FLOP/s {fc1}")
    check(near(mods["fc2"]["flops_per_s"], 24000 / 0.016), f"fc2 FLOP/s {mods['fc2']}")

    p = run([z, "trace", "summary", os.path.join(fx, "two_ranks.json")])
    for n in ["rank 0: 2 steps, mean step 10.000 ms", "rank 1: 2 steps, mean step 12.000 ms",
              "hidden behind compute 4.000 ms, exposed 1.000 ms", "slowest rank: 1 (mean step 12.000 ms, 20.0% above",
              "fc1", "1.71 M"]:
        check(n in p.stdout, f"summary text lacks {n!r}:\n{p.stdout}")
    check("note: module" not in p.stdout, f"no rate note where the spans hold the FLOPs:\n{p.stdout}")
    # outside_modules.json: two_ranks.json with fc2 declaring 100x its FLOPs (as a model whose spans hold none
    # of its work): fc2's 150 MFLOP/s is 125x the steps' 1.2 MFLOP/s, and the summary says why; fc1 (1.4x) not
    p = run([z, "trace", "summary", os.path.join(fx, "outside_modules.json")])
    check("note: module fc2's FLOP/s is 125x the whole step's (1.2 MFLOP/s)" in p.stdout and
          "computes outside its module entries" in p.stdout and "module fc1's" not in p.stdout,
          f"a module rate far above the step's is explained:\n{p.stdout}")
    p = run([z, "trace", "summary", os.path.join(fx, "crossing.json"), "--json"])
    check("cut at the parent's end" in run([z, "trace", "summary", os.path.join(fx, "crossing.json")]).stdout,
          "a span crossing its parent's end is said")

    # a kernel pool worker's job (cat pool) is compute: comm 500..900 us under forward 0..600 and the pool
    # job 200..500 is hidden for 100 us
    r = json.loads(run([z, "trace", "summary", os.path.join(fx, "pool.json"), "--json"]).stdout)["ranks"][0]
    check(near(r["phases"]["pool"]["ms"], 0.3) and near(r["phases"]["pool"]["pct"], 30), f"pool phase {r}")
    check(near(r["comm_hidden_ms"], 0.1) and near(r["comm_exposed_ms"], 0.3), f"pool is compute {r}")

    S = [z, "trace", "summary"]
    expect_error(S + [os.path.join(fx, "truncated.json")], 1, "truncated.json: not valid JSON at line",
                 "cut short")
    expect_error(S + [os.path.join(fx, "not_zinc.json")], 1, "not a zinc trace: no otherData.format")
    expect_error(S + [os.path.join(fx, "future_format.json")], 1, "\"zinc-trace 9\"", "reads \"zinc-trace 1\"")
    expect_error(S + [os.path.join(fx, "missing_dur.json")], 1, "traceEvents[10] (\"step\")", "\"dur\" is missing")
    expect_error(S + [os.path.join(fx, "bad_pid.json")], 1, "pid 5 is not a rank of otherData.world_size 2")
    expect_error(S + [os.path.join(fx, "step_no_samples.json")], 1, "a step span needs args.samples")
    expect_error(S + [fx], 1, "is a directory")
    fifo = os.path.join(work, "fifo.json")
    os.mkfifo(fifo)
    expect_error(S + [fifo], 1, "FIFO")
    expect_error(S + [os.path.join(work, "absent.json")], 1, "absent.json")
    notjson = os.path.join(work, "text.json")
    open(notjson, "w").write("step 1 took 3 ms\n")
    expect_error(S + [notjson], 1, "not valid JSON at line 1")
    expect_error(S, 2, "the trace file is required")
    expect_error([z, "trace", "frobnicate", "x"], 2, "unknown subcommand \"frobnicate\"")
    expect_error([z, "trace", "plot", os.path.join(fx, "two_ranks.json")], 2, "--out FILE.svg is required")
    expect_error([z, "trace", "plot", os.path.join(fx, "two_ranks.json"), "--out", "x.pdf"], 1, ".svg or .png")


def plot_part(z, fx, work):
    trace = os.path.join(work, "t.json")
    shutil.copy(os.path.join(fx, "two_ranks.json"), trace)
    out = os.path.join(work, "gantt.svg")
    run([z, "trace", "plot", trace, "--out", out])
    svg = open(out).read()
    for n in ["forward", "backward", "comm", "wait", "optimizer", "data", "engine", "step", "rank 0 main",
              "rank 0 comm", "rank 0 pool 0", "rank 1 main", "time since the job"]:
        check(n in svg, f"the SVG lacks {n!r}")
    check(os.path.exists(out + ".dat") and os.path.exists(out + ".gp"), "data and script beside the picture")
    expect_error([z, "trace", "plot", trace, "--out", out], 1, "already exists", "--force")
    run([z, "trace", "plot", trace, "--out", out, "--force"])
    before = open(trace).read()
    bad = os.path.join(work, "t.json.svg")
    os.symlink(trace, bad)  # a link at the output path is never followed
    expect_error([z, "trace", "plot", trace, "--out", bad, "--force"], 1, "link")
    check(open(trace).read() == before, "the trace is untouched")
    plot_hostile(z, fx, work)


def plot_hostile(z, fx, work):
    """Issue 42: a thread name, the trace's file name and --out holding backquoted commands, quotes, backslashes
    and newlines are drawn as text: gnuplot runs none of them (it would create the files named)."""
    d = os.path.join(work, "hostile")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    t = json.load(open(os.path.join(fx, "two_ranks.json")))
    evil = 'm`touch pw_thread`"\\q\n\r`touch pw_thread2`'
    for ev in t["traceEvents"]:
        if ev.get("name") == "thread_name" and ev["pid"] == 0 and ev["tid"] == 0:
            ev["args"]["name"] = evil
    name = 't`touch pw_file`"q\\.json'
    json.dump(t, open(os.path.join(d, name), "w"))
    out = 'g`touch pw_out`"\\.svg'
    p = subprocess.run([z, "trace", "plot", name, "--out", out], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 0, f"the hostile plot exits {p.returncode}: {p.stderr[-600:]}")
    for f in ["pw_thread", "pw_thread2", "pw_file", "pw_out"]:
        check(not os.path.exists(os.path.join(d, f)), f"gnuplot ran a command from the trace: {f} was created")
    check(os.path.exists(os.path.join(d, out)), "the picture is written under the --out name as given")
    svg = open(os.path.join(d, out)).read() if os.path.exists(os.path.join(d, out)) else ""
    check("touch pw_thread" in svg and "touch pw_file" in svg, "the names are drawn as text, backquotes and all")


def mlp_cmd(z, cfg, rep, extra=()):
    return [z, "train", "--config", cfg, "--steps", "6", "--threads", "1", "--report", rep, "--force"] + list(extra)


def flops_part(z, work, mpirun):
    cfg = os.path.join(work, "c.json")
    json.dump({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "steps_per_print": 2,
               "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}, open(cfg, "w"))
    rep = os.path.join(work, "mlp.json")
    # the default MLP: 32 -> 128 -> 128 -> 8; forward 2 in out per layer, backward dW everywhere and dx above
    # the first layer
    layers = [(32, 128), (128, 128), (128, 8)]
    want = sum(2 * i * o for i, o in layers) + sum((2 if k == 0 else 4) * i * o for k, (i, o) in enumerate(layers))
    p = run(mlp_cmd(z, cfg, rep, ["--set", "gradient_accumulation_steps=2", "--peak-flops", "1e9"]))
    r = json.load(open(rep))
    check(r["flops_per_sample"] == want, f"MLP flops_per_sample {r['flops_per_sample']}, want {want}")
    check(0 < r["flops_train_seconds"] <= r["seconds"], f"train seconds {r['flops_train_seconds']} {r['seconds']}")
    check(near(r["flops_per_s"], want * 6 * 16 / r["flops_train_seconds"]), f"FLOP/s {r['flops_per_s']}")
    check(r["peak_source"] == "given" and r["peak_flops_per_s"] == 1e9, f"peak {r}")
    check(near(r["mfu"], r["flops_per_s"] / 1e9), f"mfu {r['mfu']}")
    check("FLOP/s | MFU" in p.stderr, f"progress lines show FLOP/s and MFU: {p.stderr[-600:]}")
    run(mlp_cmd(z, cfg, rep, ["--peak-flops", "sgemm"]))
    r = json.load(open(rep))
    check(r["peak_source"] == "sgemm" and r["peak_flops_per_s"] > 1e8 and 0 < r["mfu"] < 1, f"sgemm peak {r}")
    run(mlp_cmd(z, cfg, rep))
    r = json.load(open(rep))
    check("mfu" not in r and "peak_flops_per_s" not in r and r["flops_per_s"] > 0, "no --peak-flops: no MFU")
    for bad in ["fast", "-3", "0", "1e400", "nan"]:
        expect_error(mlp_cmd(z, cfg, rep, ["--peak-flops", bad]), 2, f"--peak-flops \"{bad}\"", "sgemm")
    if mpirun:
        run(shlex.split(mpirun) + ["-np", "2"] + mlp_cmd(z, cfg, rep, ["--peak-flops", "2e9"]))
        r = json.load(open(rep))
        check(r["world_size"] == 2 and r["peak_flops_per_s"] == 4e9, f"2 ranks: the job's peak is 2 x 2e9: {r}")
        check(near(r["mfu"], r["flops_per_s"] / 4e9), f"2 ranks mfu {r['mfu']}")
        check(near(r["flops_per_s"], want * 6 * 16 / r["flops_train_seconds"]), f"2 ranks FLOP/s {r}")

    # GPT-2 on a text (bytes: vocabulary 256)
    text = os.path.join(work, "t.txt")
    open(text, "w").write("the quick brown fox jumps over the lazy dog. " * 200)
    gcfg = os.path.join(work, "g.json")
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
               "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}, open(gcfg, "w"))
    grep = os.path.join(work, "gpt2.json")
    p = run([z, "train", "--model", "gpt2", "--config", gcfg, "--text", text, "--steps", "3", "--threads", "1",
             "--layers", "2", "--width", "32", "--heads", "4", "--context", "24", "--report", grep, "--force",
             "--peak-flops", "5e9"])
    g = json.load(open(grep))
    sh = g["shape"]
    T, C, L, V, H = sh["context"], sh["channels"], sh["layers"], sh["vocab"], sh["heads"]
    hs = C // H
    fwd = []  # (M, K, N) of every forward matrix product of one sequence
    for _ in range(L):
        fwd += [(T, C, 3 * C)] + [(T, hs, T)] * H + [(T, T, hs)] * H + [(T, C, C), (T, C, 4 * C), (T, 4 * C, C)]
    fwd += [(T, C, V)]
    independent = 3 * sum(2 * m * k * n for m, k, n in fwd)  # backward: input and weight gradients
    check(g["flops_per_sample"] == independent, f"GPT-2 flops_per_sample {g['flops_per_sample']} != {independent}")
    check(near(g["flops_per_s"], independent * 3 * 4 / g["flops_train_seconds"]), f"GPT-2 FLOP/s {g}")
    check(near(g["mfu"], g["flops_per_s"] / 5e9), f"GPT-2 mfu {g['mfu']}")
    check("FLOP/s | MFU" in p.stderr, f"GPT-2 progress lines show FLOP/s and MFU: {p.stderr[-600:]}")


def gpt2_traced(z, work, mpirun, overlap):
    text = os.path.join(work, "t.txt")
    open(text, "w").write("the quick brown fox jumps over the lazy dog. " * 200)
    cfg = os.path.join(work, f"g_{overlap}.json")
    # reduce_bucket_size about one block's 50k parameters: a bucket fills per block, so with overlap_comm its
    # reduce-scatter runs while the next block's backward computes
    json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1000,
               "zero_optimization": {"stage": 2, "overlap_comm": overlap, "reduce_bucket_size": 52000},
               "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}}, open(cfg, "w"))
    trace, rep = os.path.join(work, f"g_{overlap}.trace.json"), os.path.join(work, f"g_{overlap}.report.json")
    run(shlex.split(mpirun) + ["-np", "2", z, "train", "--model", "gpt2", "--config", cfg, "--text", text,
                               "--steps", "4", "--layers", "4", "--width", "64", "--heads", "4", "--context", "64",
                               "--threads", "1", "--trace", trace, "--trace-steps", "2:3", "--report", rep,
                               "--force", "--quiet"])
    s = json.loads(run([z, "trace", "summary", trace, "--json"]).stdout)
    return s, json.load(open(trace)), json.load(open(rep)), trace


def real_part(z, work, mpirun):
    s, doc, rep, trace = gpt2_traced(z, work, mpirun, True)
    check(s["world_size"] == 2 and [r["rank"] for r in s["ranks"]] == [0, 1], f"ranks {s['ranks']}")
    for r in s["ranks"]:
        check(r["steps"] == 2 and r["samples"] == 8, f"rank {r['rank']}: steps {r['steps']} samples {r['samples']}")
        for phase in ["forward", "backward", "comm", "optimizer"]:
            check(r["phases"].get(phase, {}).get("ms", 0) > 0, f"rank {r['rank']} has {phase} time: {r['phases']}")
        check(r["comm_hidden_ms"] > 0, f"overlap_comm: rank {r['rank']} hides some comm: {r['comm_hidden_ms']}")
    other = doc["otherData"]
    check(other["flops_per_sample"] == rep["flops_per_sample"], f"otherData flops {other['flops_per_sample']}")
    T, C, V = 64, 64, rep["shape"]["vocab"]
    block = 24 * T * C * C + 4 * T * T * C
    want = {"embed": (4 * T * C * V, 2 * T * C * V), "lnf": (0, 0)}
    want.update({f"h{l}": (block, 2 * block) for l in range(4)})
    mods = {m["name"]: m for m in s["modules"]}
    check(sorted(mods) == sorted(want), f"modules {list(mods)}")
    for name, (f, b) in want.items():
        m = mods.get(name, {})
        if f:
            check(other["module_flops"].get(name) == [f, b], f"otherData module_flops[{name}]")
        check(near(m.get("forward_flops"), f * 16) and near(m.get("backward_flops"), b * 16), f"{name} FLOPs {m}")
        if f and m.get("forward_ms", 0) + m.get("backward_ms", 0) > 0:
            check(near(m["flops_per_s"], 16e3 * (f + b) / (m["forward_ms"] + m["backward_ms"])),
                  f"{name} FLOP/s = FLOPs / time: {m}")
    s, _, _, _ = gpt2_traced(z, work, mpirun, False)
    for r in s["ranks"]:
        check(r["comm_hidden_ms"] == 0 and r["phases"]["comm"]["ms"] > 0,
              f"no overlap_comm: rank {r['rank']} hides no comm: {r['comm_hidden_ms']}")
    if shutil.which("gnuplot"):
        out = os.path.join(work, "real.svg")
        run([z, "trace", "plot", trace, "--out", out])
        svg = open(out).read()
        for n in ["rank 0 main", "rank 1 main", "comm", "forward", "backward"]:
            check(n in svg, f"the real trace's SVG lacks {n!r}")
    # the MLP, one rank, no mpirun
    cfg = os.path.join(work, "m.json")
    json.dump({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 16,
               "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}, open(cfg, "w"))
    mt = os.path.join(work, "mlp.trace.json")
    p = run([z, "train", "--config", cfg, "--steps", "5", "--threads", "1", "--trace", mt, "--trace-steps", "2:4",
             "--force"])
    check("modules (self time summed over ranks; FLOPs from the model's declaration)" in p.stderr and
          "fc3" in p.stderr, f"a traced run ends with the module table: {p.stderr[-800:]}")
    s = json.loads(run([z, "trace", "summary", mt, "--json"]).stdout)
    check(s["world_size"] == 1 and s["ranks"][0]["steps"] == 3 and s["ranks"][0]["samples"] == 48, f"MLP {s}")
    check([m["name"] for m in s["modules"]] == ["fc1", "fc2", "fc3"], f"MLP modules {s['modules']}")
    check(all(m.get("flops_per_s", 0) > 0 for m in s["modules"]), f"MLP module FLOP/s {s['modules']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--part", choices=["summary", "plot", "flops", "real"], required=True)
    ap.add_argument("--mpirun", default="")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    if a.part == "summary":
        summary_part(a.zinc, a.fixtures, a.workdir)
    elif a.part == "plot":
        if not shutil.which("gnuplot"):
            print("gnuplot is not installed (Debian: gnuplot-nox): skipped")
            return 77
        plot_part(a.zinc, a.fixtures, a.workdir)
    elif a.part == "flops":
        flops_part(a.zinc, a.workdir, a.mpirun)
    else:
        real_part(a.zinc, a.workdir, a.mpirun)
    print(f"{a.part}: {'FAIL' if checks.failures else 'ok'} ({checks.failures} checks.failures)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
