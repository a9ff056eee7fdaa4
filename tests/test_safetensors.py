#!/usr/bin/env python3
"""End-to-end checkpoints through the zinc CLI, and the safetensors export read back by Python.

  zinc train --save/--save-every on 2 ranks (ZeRO stage 3, fp16), then --resume from the middle on the
  same ranks (the final weights must be bitwise the same: equal parameter checksums) and on 1 rank at
  stage 1 (bf16; close, not bitwise), zinc checkpoint inspect --verify, and a damaged shard caught by it.
  Without --cli-only also: zinc checkpoint export in fp32, fp16 and bf16, loaded with the `safetensors`
  package; the fp32 tensors, concatenated in parameter order, must hash to the training run's parameter
  checksum (FNV-1a over the fp32 bits of zinc_gather_master), fp16 must be numpy's rounding of them and
  bf16 their round-to-nearest-even.

Exit 0 pass, 1 fail, 77 skip (safetensors or numpy missing, without --cli-only).
"""
import argparse
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys

import checks
from checks import check


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect:
        print("command:", " ".join(cmd))
        print(p.stdout)
    check(p.returncode == expect, f"exit {p.returncode}, expected {expect}: {' '.join(cmd[-8:])}")
    return p.stdout


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="", help="launcher prefix for 2 ranks, without -np")
    ap.add_argument("--cli-only", action="store_true")
    a = ap.parse_args()

    if not a.cli_only:
        try:
            import numpy  # noqa: F401
            import safetensors  # noqa: F401
        except ImportError as e:
            print(f"skip: {e} (scripts/test.sh installs safetensors and numpy into build/pyenv; "
                  f"or configure with -DZINC_PYTHON=/path/to/python)")
            return 77

    work = a.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = ["--in-dim", "12", "--hidden", "24", "--depth", "2", "--quiet"]

    def config(stage, dtype):
        c = {"train_batch_size": 16, "gradient_accumulation_steps": 2,
             "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.003, "warmup_num_steps": 4,
                                                          "warmup_type": "linear"}},
             "fp16": {"enabled": dtype == "fp16", "initial_scale_power": 8, "loss_scale_window": 2},
             "bf16": {"enabled": dtype == "bf16"},
             "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 100}}
        p = os.path.join(work, f"s{stage}_{dtype}.json")
        with open(p, "w") as f:
            json.dump(c, f)
        return p

    mpi = shlex.split(a.mpirun) + ["-np", "2"] if a.mpirun else []
    ranks = 2 if mpi else 1
    cfg = config(3, "fp16")
    ck = os.path.join(work, "ck")
    full, res, res1 = (os.path.join(work, n) for n in ("full.json", "res.json", "res1.json"))

    run(mpi + [a.zinc, "train", "--config", cfg, "--steps", "6", "--save", ck, "--save-every", "3",
               "--report", full] + model)
    check(open(os.path.join(ck, "latest")).read() == "step6\n", "latest does not name step6")
    check(os.path.isdir(os.path.join(ck, "step3")), "no step3 checkpoint")
    run(mpi + [a.zinc, "train", "--config", cfg, "--steps", "6", "--resume", os.path.join(ck, "step3"),
               "--report", res] + model)
    rf, rr = json.load(open(full)), json.load(open(res))
    check(rr["resumed_from_step"] == 3 and rr["steps"] == 6, f"resumed run report {rr}")
    check(rf["param_checksum"] == rr["param_checksum"],
          f"resumed on {ranks} ranks: checksum {rr['param_checksum']} != uninterrupted {rf['param_checksum']}")
    print(f"resume on {ranks} rank(s), stage 3 fp16: checksum {rr['param_checksum']} (bitwise as uninterrupted)")

    run([a.zinc, "train", "--config", config(1, "bf16"), "--steps", "6", "--resume", os.path.join(ck, "step3"),
         "--report", res1] + model)
    r1 = json.load(open(res1))
    check(r1["steps"] == 6 and abs(r1["param_l2_norm"] - rf["param_l2_norm"]) < 1e-2 * rf["param_l2_norm"],
          f"resumed on 1 rank stage 1 bf16: norm {r1['param_l2_norm']} vs {rf['param_l2_norm']}")
    print(f"resume on 1 rank, stage 1 bf16: norm {r1['param_l2_norm']:.6f} vs {rf['param_l2_norm']:.6f}")

    out = run([a.zinc, "checkpoint", "inspect", ck, "--verify"])
    check("step 6 (" in out and f"{ranks} of {ranks} file" in out, "inspect output:\n" + out)
    man = json.loads(run([a.zinc, "checkpoint", "inspect", ck, "--json"]))
    check(man["step"]["steps"] == 6 and man["world_size"] == ranks and man["zero_stage"] == 3,
          "inspect --json manifest")

    # A damaged copy: inspect --verify names the file and exits 1.
    bad = os.path.join(work, "bad")
    shutil.copytree(os.path.join(ck, "step6"), bad)
    shard = os.path.join(bad, man["files"][-1]["name"])
    with open(shard, "r+b") as f:
        f.seek(5000)
        b = f.read(1)
        f.seek(5000)
        f.write(bytes([b[0] ^ 1]))
    out = run([a.zinc, "checkpoint", "inspect", bad, "--verify"], expect=1)
    check(man["files"][-1]["name"] in out and "corrupted" in out, "inspect --verify on a damaged file:\n" + out)
    run([a.zinc, "checkpoint", "export", bad, "--out", os.path.join(work, "bad.safetensors")], expect=1)
    if a.cli_only:
        return 1 if checks.failures else 0

    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file

    params = man["params"]
    paths = {}
    for dt in ("fp32", "fp16", "bf16"):
        paths[dt] = os.path.join(work, f"model_{dt}.safetensors")
        run([a.zinc, "checkpoint", "export", ck, "--out", paths[dt], "--dtype", dt])

    t32 = load_file(paths["fp32"])
    check(list(t32.keys()) == [p["name"] for p in params] or set(t32) == {p["name"] for p in params},
          f"tensor names {sorted(t32)}")
    blob = b""
    for p in params:
        t = t32.get(p["name"])
        if not check(t is not None and t.dtype == np.float32 and list(t.shape) == p["shape"],
                     f"{p['name']}: {None if t is None else (t.dtype, t.shape)} vs {p['shape']}"):
            continue
        blob += np.ascontiguousarray(t).astype("<f4").tobytes()
    check(fnv1a64(blob) == rf["param_checksum"],
          f"fp32 export checksum {fnv1a64(blob)} != training run's {rf['param_checksum']}")
    norm = float(np.sqrt(sum(float(np.sum(t32[p['name']].astype(np.float64) ** 2)) for p in params)))
    check(abs(norm - rf["param_l2_norm"]) < 1e-9 * max(1.0, norm), f"norm {norm} vs {rf['param_l2_norm']}")
    print(f"fp32 export: {len(params)} tensors, checksum {fnv1a64(blob)} = the training run's, norm {norm:.6f}")

    t16 = load_file(paths["fp16"])
    for p in params:
        ok = t16[p["name"]].dtype == np.float16 and np.array_equal(
            t16[p["name"]].view(np.uint16), t32[p["name"]].astype(np.float16).view(np.uint16))
        check(ok, f"fp16 export of {p['name']} is not the fp32 weights rounded")
    print("fp16 export: every tensor equals the fp32 export rounded by numpy")

    with safe_open(paths["bf16"], "numpy") as f:
        check(sorted(f.keys()) == sorted(p["name"] for p in params), "bf16 keys")
        meta = f.metadata() or {}
        check(meta.get("format") == "pt" and meta.get("step") == "6", f"metadata {meta}")
        for p in params:
            s = f.get_slice(p["name"])
            check(s.get_dtype() == "BF16" and list(s.get_shape()) == p["shape"], f"bf16 {p['name']} header")
    raw = open(paths["bf16"], "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    for p in params:
        lo, hi = header[p["name"]]["data_offsets"]
        got = np.frombuffer(data[lo:hi], dtype="<u2")
        u = t32[p["name"]].reshape(-1).view(np.uint32).astype(np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        check(np.array_equal(got, want), f"bf16 export of {p['name']} is not round-to-nearest-even")
    print("bf16 export: safetensors reads the header; every tensor is the fp32 export rounded to nearest even")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    rc = main()
    print("safetensors test:", "FAILED" if rc == 1 else "skipped" if rc == 77 else "passed")
    sys.exit(rc)
