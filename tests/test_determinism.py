#!/usr/bin/env python3
"""zinc.deterministic_reduction end to end through `zinc train` (standard library only).

  mlp, gpt2: the same global batch split as 1 rank x gradient_accumulation_steps 4, 2 x 2 and 4 x 1 (mpirun),
        ZeRO stages 0-3, fp32, gradient clipping active: with the key the final parameters (the report's
        checksum), the last gradient norm and (GPT-2) every loss are bitwise equal across the splits and
        stages; the MLP's losses within 1e-12 relative (the model sums its loss metric in double in its own
        order, micro-steps first: a metric, not the training). Without the key the same comparison differs
        at stages 0 and 2 (so the check can fail). Also --threads 1 vs 2, prescale_gradients,
        gradient_predivide_factor 3, Lion and Adagrad, optimizer state offloaded to CPU memory and NVMe, and
        2 steps saved at 4 ranks then resumed at 1 rank, the cpu device presented as a discrete one (MLP).
  errors: 3 ranks, gradient_accumulation_steps 3, fp16, bf16, communication_data_type fp16, Lamb and
        zinc.device cuda are refused, each with a message naming the key, the value and the fix.
Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

import checks
from checks import check

A = None


def w(name):
    return os.path.join(A.workdir, name)


def config(name, stage, det, batch=16, micro=4, extra=None, zinc=None):
    c = {"train_batch_size": batch, "train_micro_batch_size_per_gpu": micro, "gradient_clipping": 0.05,
         "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
         "zero_optimization": {"stage": stage, "reduce_bucket_size": 1000,
                               "stage3_param_persistence_threshold": 100}}
    z = dict(zinc or {})
    if det is not None:
        z["deterministic_reduction"] = det
    if z:
        c["zinc"] = z
    c.update(extra or {})
    with open(w(name), "w") as f:
        json.dump(c, f)
    return w(name)


def train(model_args, cfg, ranks, tag, threads=1, expect=0, steps=4, extra=(), env=None):
    rep = w(f"r_{tag}.json")
    cmd = (shlex.split(A.mpirun) + ["-np", str(ranks)] if ranks > 1 else []) + [
        A.zinc, "train", "--config", cfg, "--steps", str(steps), "--threads", str(threads), "--quiet", "--report",
        rep, "--force"] + model_args + list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != expect:
        print("command:", " ".join(cmd))
        print(p.stdout[-3000:])
    check(p.returncode == expect, f"{tag}: exit {p.returncode}, expected {expect}")
    check("sizing plan" not in p.stdout, f"{tag}: the buffers differ from the sizing plan: {p.stdout[-600:]}")
    if expect != 0:
        return p.stdout
    try:
        r = json.load(open(rep))
    except (OSError, ValueError):
        check(False, f"{tag}: no report")
        return None
    return {"sum": r["param_checksum"], "norm": r["final_grad_norm"], "losses": r["losses"]}


def same(a, b, exact_losses):
    if a is None or b is None or a["sum"] != b["sum"] or a["norm"] != b["norm"]:
        return False
    if exact_losses:
        return a["losses"] == b["losses"]
    return all(abs(x - y) <= 1e-12 * abs(y) for x, y in zip(a["losses"], b["losses"]))


def splits(model, margs, exact_losses):
    """The key on: every split of every stage equals 1 rank x 4 micro-steps of stage 0."""
    ref = None
    for stage in (0, 1, 2, 3):
        cfg = config(f"{model}_s{stage}_on.json", stage, True)
        for ranks in (1, 2, 4):
            r = train(margs, cfg, ranks, f"{model}_s{stage}_on_np{ranks}")
            if ref is None:
                ref = r
                continue
            check(same(r, ref, exact_losses),
                  f"{model} stage {stage} {ranks} ranks x gas {4 // ranks}: {r} differs from 1 rank x gas 4 stage 0's "
                  f"{ref}")
    # the key off: the old sums associate by split, and the same comparison sees it
    for stage in (0, 2):
        cfg = config(f"{model}_s{stage}_off.json", stage, None)
        got = [train(margs, cfg, ranks, f"{model}_s{stage}_off_np{ranks}") for ranks in (1, 2, 4)]
        sums = {g["sum"] for g in got if g}
        print(f"{model} stage {stage} without the key: checksums {sorted(sums)}", flush=True)
        check(len(sums) > 1, f"{model} stage {stage} without the key: the splits agree ({sums}), so this test "
              "could not tell the fixed tree from the old sums")
    # --threads
    cfg = w(f"{model}_s2_on.json")
    for ranks in (1, 2):
        r = train(margs, cfg, ranks, f"{model}_s2_on_np{ranks}_t2", threads=2)
        check(same(r, ref, exact_losses), f"{model} stage 2 {ranks} ranks --threads 2: {r} vs {ref}")
    return ref


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--mpirun", default="mpirun --oversubscribe")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--part", choices=["mlp", "gpt2", "errors"], required=True)
    A = ap.parse_args()
    os.makedirs(A.workdir, exist_ok=True)

    if A.part == "mlp":
        margs = ["--model", "mlp", "--hidden", "32", "--depth", "2"]
        ref = splits("mlp", margs, exact_losses=False)
        # scaling before the sum (prescale_gradients: 1/world; predivide 3: not a power of two, the same rounding
        # of every leaf) and optimizer state in CPU memory
        for name, extra in (("prescale", {"prescale_gradients": True}), ("predivide", {"gradient_predivide_factor": 3}),
                            ("lion", {"optimizer": {"type": "Lion", "params": {"lr": 0.01}}}),
                            ("adagrad", {"optimizer": {"type": "Adagrad", "params": {"lr": 0.01}}}), ("offload", None)):
            if name == "offload":
                cfg = config("mlp_offload.json", 2, True,
                             extra={"zero_optimization": {"stage": 2, "reduce_bucket_size": 1000,
                                                          "offload_optimizer": {"device": "cpu"}}})
                got = [train(margs, cfg, ranks, f"mlp_{name}_np{ranks}") for ranks in (1, 4)]
                check(same(got[0], ref, False), f"optimizer offload: {got[0]} vs {ref}")
                os.makedirs(w("nvme"), exist_ok=True)
                nv = config("mlp_nvme.json", 3, True, zinc={"allow_buffered_io": True},
                            extra={"zero_optimization": {"stage": 3, "reduce_bucket_size": 1000,
                                                         "offload_optimizer": {"device": "nvme",
                                                                               "nvme_path": w("nvme")}}})
                r = train(margs, nv, 2, "mlp_nvme_np2")
                check(same(r, ref, False), f"optimizer state on NVMe, stage 3, 2 ranks: {r} vs {ref}")
                # 2 steps at 4 ranks, saved, resumed at 1 rank for the other 2: where 4 steps at 1 rank end
                ck = w("ck")
                shutil.rmtree(ck, ignore_errors=True)
                train(margs, w("mlp_s2_on.json"), 4, "mlp_save_np4", steps=2, extra=["--save", ck])
                r = train(margs, w("mlp_s2_on.json"), 1, "mlp_resume_np1", extra=["--resume", ck])
                check(r is not None and r["sum"] == ref["sum"] and r["norm"] == ref["norm"],
                      f"saved at 4 ranks, resumed at 1: {r} vs {ref}")
                # the cpu device presented as a discrete one (the norm's chunks through the device operation)
                r = train(margs, w("mlp_s3_on.json"), 2, "mlp_discrete_np2", env={"ZINC_CPU_DISCRETE": "1"})
                check(same(r, ref, False), f"ZINC_CPU_DISCRETE=1, stage 3, 2 ranks: {r} vs {ref}")
            else:
                cfg = config(f"mlp_{name}.json", 1, True, extra=extra)
                got = [train(margs, cfg, ranks, f"mlp_{name}_np{ranks}") for ranks in (1, 4)]
            check(same(got[0], got[1], False), f"{name}: 1 rank x gas 4 {got[0]} vs 4 x 1 {got[1]}")

    if A.part == "gpt2":
        text = w("t.txt")
        with open(text, "w") as f:
            f.write("".join(f"line {i}: the quick brown fox {i * 7 % 13} jumps over the lazy dog.\n"
                            for i in range(300)))
        margs = ["--model", "gpt2", "--text", text, "--layers", "2", "--width", "32", "--heads", "2", "--context",
                 "16", "--vocab", "256"]
        splits("gpt2", margs, exact_losses=True)

    if A.part == "errors":
        margs = ["--model", "mlp", "--hidden", "8", "--depth", "1"]
        key = "zinc.deterministic_reduction"
        out = train(margs, config("e_world.json", 0, True, batch=12, micro=4), 3, "e_world3", expect=1)
        check(key in out and "power-of-two number of ranks; this job has 3" in out, f"3 ranks: {out[-500:]}")
        out = train(margs, config("e_gas.json", 0, True, batch=12, micro=4), 1, "e_gas3", expect=1)
        check(key in out and "gradient_accumulation_steps a power of two; it is 3" in out, f"gas 3: {out[-500:]}")
        for name, extra, needle in (
                ("fp16", {"fp16": {"enabled": True}}, "fp16.enabled is true"),
                ("bf16", {"bf16": {"enabled": True}}, "bf16.enabled is true"),
                ("comm", {"communication_data_type": "fp16"}, "communication_data_type is fp16"),
                ("lamb", {"optimizer": {"type": "Lamb", "params": {"lr": 0.01}}}, "does not support the Lamb")):
            out = train(margs, config(f"e_{name}.json", 2, True, extra=extra), 1, f"e_{name}", expect=1)
            check(key in out and needle in out and "set it false" in out, f"{name}: {out[-500:]}")
        out = train(margs, config("e_cuda.json", 2, True, zinc={"device": "cuda"}), 1, "e_cuda", expect=1)
        check(key in out and "cpu device only" in out, f"zinc.device cuda: {out[-500:]}")
        # the key off, the same configs run (the refusals are the key's alone)
        train(margs, config("e_gas_off.json", 0, False, batch=12, micro=4), 1, "e_gas3_off")

    print("determinism:", "FAILED %d" % checks.failures if checks.failures else "passed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
