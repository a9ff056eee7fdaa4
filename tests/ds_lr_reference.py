#!/usr/bin/env python3
"""The learning rate, betas and skipped-step count a real DeepSpeed engine uses at each optimizer step of a
ds_config (issue 43): a tiny torch model through deepspeed.initialize on the CPU (DS_ACCELERATOR=cpu, one
process), reading optimizer.param_groups[0] before each step, as a user sees it. tests/test_lr_deepspeed.py
runs it beside `zinc train --report`; tests/test_lr_schedule.c quotes values it printed.

  ds_lr_reference.py --cases CASES.json --out RESULTS.json --workdir DIR

CASES.json is a list of runs, each {"config": {...}, "steps": N, "inf_steps": [2, 3], "resume_at": K}:
inf_steps: the loss of those steps (from 1) is multiplied by inf, so their gradients are non-finite and
DeepSpeed skips them (bf16 with ZeRO stage 1 or 2 checks overflow; the CPU accelerator has no fp16);
resume_at K: after step K the engine saves a checkpoint into DIR, a second engine built from a fresh model
loads it, and steps K+1..N run on that one (a resumed run).
Writes RESULTS.json, a JSON list, one object per case: lrs, beta1s, beta2s (null without betas), skipped (the engine's count
after each step). Exit 77 when deepspeed or torch cannot be imported (the reason on stderr)."""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", default=".")
    a = ap.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    for k, v in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1")):
        os.environ.setdefault(k, v)
    try:
        import logging
        import torch
        import deepspeed
        from deepspeed.utils import logger
        logger.setLevel(logging.ERROR)
    except Exception as ex:  # ImportError, or a broken install
        print(f"deepspeed cannot be imported: {type(ex).__name__}: {ex}", file=sys.stderr)
        sys.exit(77)
    results = []
    for i, case in enumerate(json.load(open(a.cases))):
        results.append(run_case(torch, deepspeed, case, os.path.join(a.workdir, f"ds_ckpt{i}")))
    with open(a.out, "w") as f:
        json.dump(results, f)


def run_case(torch, deepspeed, case, ckpt_dir):
    cfg = case["config"]
    bad = set(case.get("inf_steps", []))
    resume_at = case.get("resume_at", 0)
    dtype = torch.bfloat16 if cfg.get("bf16", {}).get("enabled") else torch.float32
    micro = cfg.get("train_micro_batch_size_per_gpu", cfg.get("train_batch_size", 1))

    def engine():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        eng, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=dict(cfg))
        return eng

    eng = engine()
    out = {"lrs": [], "beta1s": [], "beta2s": [], "skipped": []}
    gen = torch.Generator().manual_seed(1)
    for k in range(1, case["steps"] + 1):
        g = eng.optimizer.param_groups[0]
        betas = g.get("betas")
        out["lrs"].append(float(g["lr"]))
        out["beta1s"].append(float(betas[0]) if betas else None)
        out["beta2s"].append(float(betas[1]) if betas else None)
        for _ in range(eng.gradient_accumulation_steps()):
            x = torch.randn(micro, 4, generator=gen).to(dtype)
            loss = eng(x).float().pow(2).mean()
            if k in bad:
                loss = loss * float("inf")
            eng.backward(loss)
            eng.step()
        out["skipped"].append(int(eng.skipped_steps))
        if k == resume_at:
            eng.save_checkpoint(ckpt_dir, tag="resume")
            eng = engine()
            eng.load_checkpoint(ckpt_dir, tag="resume")
    return out


if __name__ == "__main__":
    main()
