"""Mismatched ranks never hang (issue 18): jobs whose ranks get different configs or command lines, and jobs
with a rank that stops or dies, each under `timeout`. A job passes when it ends, with a non-zero exit status,
well before the timeout, and (for a mismatch) every rank printed the same error naming what differs.

  test_mismatch.py --zinc build/zinc --mpirun "mpirun --oversubscribe ..." --workdir DIR

Prints one line per job and the figures: jobs, hangs (timeouts), jobs that exited 0 (goal 0 for both).
ZINC_COLLECTIVE_TIMEOUT_S is set to 10 s for the jobs: the watchdog's limit for a rank that stops."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

LIMIT = 90  # seconds a job may take before it counts as a hang


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--configs", required=True)
    a = ap.parse_args()
    work = os.path.abspath(a.workdir)
    a.configs = os.path.abspath(a.configs)
    a.zinc = os.path.abspath(a.zinc)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    mpirun = shlex.split(a.mpirun)
    z = a.zinc
    base = os.path.join(a.configs, "zero2_fp16.json")
    cfg = json.load(open(base))

    def variant(name, edit):
        c = json.loads(json.dumps(cfg))
        edit(c)
        p = os.path.join(work, name + ".json")
        json.dump(c, open(p, "w"))
        return p

    clip = variant("clip", lambda c: c.__setitem__("gradient_clipping", 0.5))
    nvme_cfg = json.load(open(os.path.join(a.configs, "zero3_nvme_offload.json")))
    nvme_cfg["zero_optimization"]["offload_optimizer"]["nvme_path"] = os.path.join(work, "nvme")
    os.makedirs(os.path.join(work, "nvme"))
    nvme = os.path.join(work, "nvme.json")
    json.dump(nvme_cfg, open(nvme, "w"))
    del nvme_cfg["zero_optimization"]["offload_optimizer"]
    no_nvme = os.path.join(work, "no_nvme.json")
    json.dump(nvme_cfg, open(no_nvme, "w"))
    ckpt = os.path.join(work, "ckpt")
    env = dict(os.environ, ZINC_COLLECTIVE_TIMEOUT_S="10")
    subprocess.run([z, "train", "--config", base, "--steps", "2", "--save", ckpt, "--quiet"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    common = ["--quiet", "--threads", "1"]
    t = [z, "train", "--config", base, "--steps", "4"] + common
    cases = [
        ("--steps differs", t, [z, "train", "--config", base, "--steps", "5"] + common, "--steps"),
        ("ZeRO stage differs", t, [z, "train", "--config", os.path.join(a.configs, "zero3_fp16.json"),
                                   "--steps", "4"] + common, "config "),
        ("dtype differs", t, [z, "train", "--config", os.path.join(a.configs, "zero1_bf16.json"),
                              "--steps", "4"] + common, "config"),
        ("--save on one rank", t, t + ["--save", os.path.join(work, "s1")], "--save"),
        ("--resume on one rank", t, t + ["--resume", ckpt], "--resume"),
        ("NVMe offload on one rank", [z, "train", "--config", no_nvme, "--steps", "2"] + common,
         [z, "train", "--config", nvme, "--steps", "2"] + common, "offload_optimizer"),
        ("--seed differs", t, t + ["--seed", "7"], "seed"),
        ("gradient_clipping differs", t, [z, "train", "--config", clip, "--steps", "4"] + common,
         "gradient_clipping"),
        ("--hidden differs (model)", t, t + ["--hidden", "64"], "model parameters"),
        ("config invalid on one rank", t, [z, "train", "--config", os.path.join(work, "missing.json"),
                                           "--steps", "4"] + common, "missing.json"),
        ("--report unwritable on one rank", t, t + ["--report", "/nonexistent/dir/r.json"], "--report"),
        # A rank that stops (SIGSTOP) or dies (SIGKILL) in the middle of training.
        ("a rank stops", [z, "train", "--config", base, "--steps", "1000000"] + common,
         ["sh", "-c", 'exec 3>&2; "$@" & p=$!; sleep 3; kill -STOP $p; wait $p', "sh", z, "train", "--config",
          base, "--steps", "1000000"] + common, "ZINC_COLLECTIVE_TIMEOUT_S"),
        ("a rank dies", [z, "train", "--config", base, "--steps", "1000000"] + common,
         ["sh", "-c", '"$@" & p=$!; sleep 3; kill -KILL $p; wait $p', "sh", z, "train", "--config", base,
          "--steps", "1000000"] + common, None),
    ]
    hangs = zeros = bad = 0
    for name, r0, r1, needle in cases:
        cmd = ["timeout", str(LIMIT)] + mpirun + ["-np", "1"] + r0 + [":", "-np", "1"] + r1
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=work)
        dt = time.time() - t0
        out = p.stdout.decode(errors="replace")
        hang = p.returncode == 124
        hangs += hang
        zeros += p.returncode == 0
        ok = not hang and p.returncode != 0
        if needle and ok:
            lines = [l for l in out.splitlines() if l.startswith("zinc train:") or "ZINC_COLLECTIVE" in l]
            ok = any(needle in l for l in lines)
            if needle != "ZINC_COLLECTIVE_TIMEOUT_S" and "different settings" in out:
                ok = ok and sum("different settings" in l for l in lines) == 2  # the same error on both ranks
        bad += not ok
        first = next((l for l in out.splitlines() if l.startswith("zinc train:") or "waited more" in l), "")
        print(f"{'ok ' if ok else 'BAD'} {name:34s} exit {p.returncode:3d} in {dt:5.1f} s  {first[:170]}")
        if not ok:
            print(out[-3000:])
    print(f"mismatched-rank jobs: {len(cases)}, hangs (killed by timeout {LIMIT} s): {hangs}, exited 0: {zeros}, "
          f"failed checks: {bad}")
    return 1 if hangs or zeros or bad else 0


if __name__ == "__main__":
    sys.exit(main())
