#!/usr/bin/env python3
"""comms_logger end to end: the bytes zinc train moves per optimizer step, read from --report's "comms", equal the
ZeRO volume of each stage computed here from the model's shapes and the partition rules of zero/partition.c
(never from zinc's own counters). Standard library only.

  test_comms_volume.py --zinc build/tests/hooks/zinc --mpirun "mpirun --oversubscribe ..." --np N --workdir DIR

Each case runs twice, K1 and K2 steps; the difference of the two runs' bytes is (K2 - K1) steady-state steps, so
the build, the first step (stage 3 records its module trace there) and the end of the run (checksums) cancel.
Per optimizer step with G micro-steps, flat = the parameters laid end to end, each rounded up to 8 elements,
padded = N x S with S = ceil(flat / N) rounded up to 64 (zero/partition.c), c = the compute dtype's bytes and
w = the communication dtype's bytes:
  stage 0: all_reduce padded x w (at the boundary; no reduce-scatter, no all-gather)
  stage 1: reduce_scatter padded x w (the whole padded gradient at the boundary), all_gather padded x c
  stage 2: reduce_scatter G x flat x w (the buckets follow the modules: the padding holds no gradient and is
           not sent), all_gather padded x c
  stage 3: reduce_scatter G x flat x w; all_gather: modules under stage3_param_persistence_threshold stay
           gathered and are refreshed once after the step (sum of their flat ranges); the others are
           gathered in forward and again in backward unless the trace says they are reused within
           stage3_max_reuse_distance elements (with distance 0: the last forward module, whose backward
           comes next), per micro-step.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def up(x, a):
    return (x + a - 1) // a * a


def partition(numel, world):
    flat = up(numel, 8)
    shard = up(max(-(-flat // world), 1), 64)
    return shard * world


def module_flat(shapes):
    """Flat elements of one module: each parameter starts on an 8-element boundary."""
    n = 0
    for numel in shapes:
        n = up(n + numel, 8)
    return n


def mlp_modules(in_dim, hidden, depth, classes):
    dims = [in_dim] + [hidden] * depth + [classes]
    return [module_flat([dims[i + 1] * dims[i], dims[i + 1]]) for i in range(len(dims) - 1)]


def gpt2_modules(V, T, C, L):
    block = [C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C]
    return [module_flat([V * C, T * C])] + [module_flat(block)] * L + [module_flat([C, C])]


def expected(stage, mods, world, G, c, w, persist, reuse0):
    flat = sum(mods)
    padded = partition(flat, world)
    if stage == 0:
        return {"all_reduce": padded * w, "reduce_scatter": 0, "all_gather": 0}
    if stage in (1, 2):
        rs = padded * w if stage == 1 else G * flat * w
        return {"all_reduce": 0, "reduce_scatter": rs, "all_gather": padded * c}
    kept = [m for m in mods if m <= persist]
    moving = [m for m in mods if m > persist]
    per_micro = 2 * sum(moving) - (moving[-1] if reuse0 and moving and mods[-1] > persist else 0)
    return {"all_reduce": 0, "reduce_scatter": G * flat * w, "all_gather": sum(kept) * c + G * per_micro * c}


def run(cmd, expect_fail=False):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if p.returncode != 0 and not expect_fail:
        print(" ".join(shlex.quote(x) for x in cmd))
        print(p.stdout[-3000:])
    return p


def op_bytes(report):
    """Bytes per op name over the report's rows (debug off: the names are the bare ops)."""
    out = {}
    for r in report.get("comms", {}).get("ops", []):
        check(r["bytes"] == r["msg_bytes"] * r["count"], f"row {r}: bytes = msg_bytes x count")
        out[r["op"]] = out.get(r["op"], 0) + r["bytes"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    N = a.np
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda n: os.path.join(a.workdir, n)
    mpirun = shlex.split(a.mpirun) + ["-np", str(N)]
    text = "".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(4000))
    with open(w("t.txt"), "w") as f:
        f.write(text)

    mlp = ["--model", "mlp", "--in-dim", "5", "--hidden", "7", "--depth", "2", "--classes", "3"]
    gpt2 = ["--model", "gpt2", "--text", w("t.txt"), "--layers", "2", "--width", "12", "--heads", "2",
            "--context", "8"]
    mlp_mods = mlp_modules(5, 7, 2, 3)
    gpt2_mods = gpt2_modules(256, 8, 12, 2)  # --text: vocabulary 256 (a multiple of 64: no padded rows)
    big = 100000  # DeepSpeed's stage3_param_persistence_threshold default: these small modules all stay

    # (name, model args, modules, stage, G, dtype, extra zero_optimization keys, persistence, reuse 0)
    cases = [
        ("mlp_s0", mlp, mlp_mods, 0, 1, "fp32", {}, big, False),
        ("mlp_s0_bf16", mlp, mlp_mods, 0, 1, "bf16", {"reduce_bucket_size": 40}, big, False),
        ("mlp_s1", mlp, mlp_mods, 1, 2, "fp32", {"reduce_bucket_size": 50}, big, False),
        ("mlp_s2", mlp, mlp_mods, 2, 2, "fp32", {}, big, False),
        ("mlp_s2_bf16_buckets", mlp, mlp_mods, 2, 1, "bf16", {"reduce_bucket_size": 20, "overlap_comm": True}, big,
         False),
        ("mlp_s3", mlp, mlp_mods, 3, 2, "fp32", {}, big, False),
        ("mlp_s3_gather", mlp, mlp_mods, 3, 2, "fp32",
         {"stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0}, 0, True),
        ("mlp_s2_offload", mlp, mlp_mods, 2, 2, "fp32", {"offload_optimizer": {"device": "cpu"}}, big, False),
        ("mlp_s3_offload", mlp, mlp_mods, 3, 1, "fp32",
         {"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"},
          "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0}, 0, True),
        ("mlp_s2_nvme", mlp, mlp_mods, 2, 1, "fp32",
         {"offload_optimizer": {"device": "nvme", "nvme_path": w("nvme")}, "_top": {"zinc": {"allow_buffered_io": True}}},
         big, False),
        ("gpt2_s0", gpt2, gpt2_mods, 0, 1, "fp32", {}, big, False),
        ("gpt2_s2", gpt2, gpt2_mods, 2, 1, "fp32", {}, big, False),
        ("gpt2_s3", gpt2, gpt2_mods, 3, 1, "fp32", {}, big, False),
    ]
    K1, K2 = 2, 4
    os.makedirs(w("nvme"))
    for name, model, mods, stage, G, dtype, extra, persist, reuse0 in cases:
        extra = dict(extra)
        top = extra.pop("_top", {})
        cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": G,
               "train_batch_size": 2 * G * N, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
               "zero_optimization": dict({"stage": stage}, **extra), "comms_logger": {"enabled": True}}
        cfg.update(top)
        if dtype == "bf16":
            cfg["bf16"] = {"enabled": True}
        with open(w(name + ".json"), "w") as f:
            json.dump(cfg, f)
        got = {}
        for k in (K1, K2):
            rep = w(f"{name}_{k}.json")
            p = run(mpirun + [a.zinc, "train", "--quiet", "--config", w(name + ".json"), "--steps", str(k),
                              "--report", rep, "--force"] + model)
            check(p.returncode == 0, f"{name}: {k} steps exit {p.returncode}")
            if p.returncode:
                break
            r = json.load(open(rep))
            check("comms" in r and r["comms"]["world_size"] == N, f"{name}: report has comms for {N} ranks")
            got[k] = op_bytes(r)
        if len(got) < 2:
            continue
        c = 2 if dtype == "bf16" else 4
        want = expected(stage, mods, N, G, c, c, persist, reuse0)
        for op, per_step in want.items():
            diff = got[K2].get(op, 0) - got[K1].get(op, 0)
            check(diff == (K2 - K1) * per_step,
                  f"{name} (stage {stage}, {N} ranks, G={G}, {dtype}): {op} moved {diff} bytes in {K2 - K1} steps, "
                  f"want {(K2 - K1) * per_step} ({per_step} per step)")
        print(f"{name}: per step " + ", ".join(f"{op} {(got[K2].get(op, 0) - got[K1].get(op, 0)) // (K2 - K1)}"
                                               for op in want))

    # message sizes as nccl-tests counts them: stage 1-2's all-gather is one call of the whole padded buffer
    r = json.load(open(w(f"mlp_s2_{K2}.json")))
    padded = partition(sum(mlp_mods), N)
    ag = [x for x in r["comms"]["ops"] if x["op"] == "all_gather"]
    check(any(x["msg_bytes"] == padded * 4 for x in ag), f"stage 2 all_gather rows {ag}: one of {padded * 4} bytes")
    check(all(x["busbw_gbps"] <= x["algbw_gbps"] * (N - 1) / N * (1 + 1e-9) for x in ag), "busbw = algbw (n-1)/n")

    # debug: the caller joins the name; prof_ops: only the listed ops; the end-of-run table in the log
    cfg = json.load(open(w("mlp_s2.json")))
    cfg["comms_logger"] = {"enabled": True, "debug": True, "prof_all": False, "prof_ops": ["reduce_scatter"]}
    with open(w("debug.json"), "w") as f:
        json.dump(cfg, f)
    p = run(mpirun + [a.zinc, "train", "--config", w("debug.json"), "--steps", "2", "--report", w("debug_r.json"),
                      "--force"] + mlp)
    check(p.returncode == 0, "debug run")
    if p.returncode == 0:
        ops = json.load(open(w("debug_r.json")))["comms"]["ops"]
        check(ops and all(x["op"].startswith("reduce_scatter | [Caller Func: ") for x in ops),
              f"prof_ops [reduce_scatter] with debug: {[x['op'] for x in ops]}")
        check("comms_logger summary (end of run, 2 steps" in p.stdout and "Comm. Op" in p.stdout,
              f"the table at the end of the run: {p.stdout[-1500:]}")
    # verbose: a line per op as it completes, and the table every steps_per_print steps
    cfg["comms_logger"] = {"enabled": True, "verbose": True}
    cfg["steps_per_print"] = 2
    with open(w("verbose.json"), "w") as f:
        json.dump(cfg, f)
    p = run(mpirun + [a.zinc, "train", "--config", w("verbose.json"), "--steps", "4"] + mlp)
    check(p.returncode == 0 and "comm op: reduce_scatter | time (ms): " in p.stdout and "| busbw (GB/s): " in p.stdout,
          f"verbose: a line per op: {p.stdout[-1500:]}")
    for when in ("after step 2;", "after step 4;", "end of run, 4 steps;"):
        check(f"comms_logger summary ({when}" in p.stdout, f"verbose: the table {when} {p.stdout[-800:]}")
    check("after step 1;" not in p.stdout and "after step 3;" not in p.stdout, "the table only every steps_per_print")
    # a bad op name: the error names it and lists the valid ones
    cfg["comms_logger"]["prof_ops"] = ["reduce"]
    del cfg["train_batch_size"]  # one rank here: derived from the micro batch and the accumulation
    with open(w("bad.json"), "w") as f:
        json.dump(cfg, f)
    p = run([a.zinc, "train", "--config", w("bad.json"), "--steps", "1"] + mlp, expect_fail=True)
    check(p.returncode != 0 and "(1 problem)" in p.stdout and "comms_logger.prof_ops[0]" in p.stdout and "\"reduce\"" in p.stdout
          and "\"reduce_scatter\"" in p.stdout, f"bad prof_ops: {p.stdout[-800:]}")
    print("comms_volume:", "FAILED %d" % failures if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
