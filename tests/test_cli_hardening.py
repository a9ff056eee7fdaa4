"""The command line under misuse (issue 18): options missing their value, numbers out of range, unusable
output paths found before training, `checkpoint inspect --verify` never calling good what load refuses
(bit flips of the manifest through the CLI), special files refused without blocking, export refusing to
replace what it must not.

  test_cli_hardening.py --zinc build/zinc --configs ds_configs --workdir DIR"""
import argparse
import os
import shutil
import stat
import subprocess
import sys
import time

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL", what)


def run(args, timeout=60):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    cfg = os.path.join(os.path.abspath(a.configs), "zero2_fp16.json")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    tr = [z, "train", "--config", cfg, "--quiet", "--threads", "1"]

    # Options without their value, numbers out of range: exit 2 before anything runs.
    for args, needle in [
        (tr + ["--resume"], "--resume needs a value"),
        (tr + ["--save", "--quiet"], "--save needs a value"),
        (tr + ["--steps"], "--steps needs a value"),
        (tr + ["--steps", "4611686018427387904"], "--steps needs an integer"),
        (tr + ["--steps", "99999999999999999999999"], "--steps needs an integer"),
        (tr + ["--save-every", "0", "--save", "x"], "--save-every needs an integer"),
        ([z, "mem", "estimate", "--config", "--json"], "--config needs a value"),
        ([z, "mem", "estimate", "--gpt2"], "needs a value"),
        ([z, "checkpoint", "inspect", "x", "--params"], "--params needs a value"),
        ([z, "checkpoint", "inspect", "x", "--params", "-5"], "--params"),
        ([z, "checkpoint", "export", "x", "--out"], "--out needs a value"),
        ([z, "config", "check", cfg, "--world-size"], "--world-size"),
    ]:
        rc, out = run(args)
        check(rc == 2 and needle in out, f"{args[1:]}: exit {rc}, output {out[:300]!r}")
    check(not os.path.exists("--quiet"), "a directory named --quiet was created")

    # mem estimate --shapes with numbers that would overflow.
    shapes = os.path.join(work, "big.shapes")
    for line in ["m w 4611686018427387904 4\n", "m w 99999999999999999999 2\n", "m w 33554432 33554432 64\n"]:
        open(shapes, "w").write(line)
        rc, out = run([z, "mem", "estimate", "--shapes", shapes, "--config", cfg])
        check(rc not in (0, "hang") and ("2^45" in out or "expected" in out), f"shapes {line!r}: exit {rc} {out[:200]!r}")

    # Unusable output paths: found before training, which is never started.
    for args, needle in [(tr + ["--steps", "3", "--report", "/nonexistent/dir/r.json"], "--report"),
                         (tr + ["--steps", "3", "--save", "/proc/zinc_cannot"], "--save"),
                         (tr + ["--steps", "3", "--save", cfg], "not a directory")]:
        rc, out = run(args)
        check(rc == 1 and needle in out and "nothing was trained" in out and "steps (" not in out,
              f"{args[-2:]}: exit {rc} {out[:300]!r}")

    # Two runs saving into one directory: the second fails at once (the first holds DIR/.zinc.run.lock).
    two = os.path.join(work, "two")
    first = subprocess.Popen(tr + ["--steps", "100000", "--save", two], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    for _ in range(200):  # until the first run holds the lock
        if os.path.exists(os.path.join(two, ".zinc.run.lock")):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    rc, out = run(tr + ["--steps", "3", "--save", two])
    check(rc == 1 and "another zinc train" in out and "nothing was trained" in out,
          f"a second run saving into the same directory: {rc} {out[:300]!r}")
    first.kill()
    first.wait()

    # A checkpoint to misuse.
    ck = os.path.join(work, "ck")
    rc, out = run(tr + ["--steps", "3", "--save", ck])
    check(rc == 0, f"train --save: {out[:300]}")
    man = os.path.join(ck, "step3", "manifest.json")
    orig = open(man, "rb").read()
    rc, out = run([z, "checkpoint", "inspect", ck, "--verify"])
    check(rc == 0 and "1 of 1 file good" in out, f"inspect --verify of a good checkpoint: {out[-300:]}")

    # Bit flips through the CLI: inspect --verify and export never succeed on a flipped manifest.
    flips = good = 0
    for bit in range(0, len(orig) * 8, 1009):  # every bit is swept in memory by test_checkpoint_manifest.c
        b = bytearray(orig)
        b[bit // 8] ^= 1 << (bit % 8)
        open(man, "wb").write(b)
        flips += 1
        rc, out = run([z, "checkpoint", "inspect", ck, "--verify"])
        rc2, _ = run([z, "checkpoint", "export", ck, "--out", os.path.join(work, "f.safetensors"), "--force"])
        if rc == 0 or rc2 == 0:
            good += 1
            check(False, f"bit {bit} flipped: inspect exit {rc}, export exit {rc2}")
    open(man, "wb").write(orig)
    print(f"CLI bit flips: {flips} tried through inspect --verify and export, {good} accepted")

    # A FIFO in place of a shard: refused without blocking.
    shard = os.path.join(ck, "step3", "rank00000.zshard")
    os.rename(shard, shard + ".keep")
    os.mkfifo(shard)
    rc, out = run([z, "checkpoint", "inspect", ck, "--verify"], timeout=30)
    check(rc == 1 and "not a regular file" in out, f"FIFO shard, inspect: {rc} {out[-300:]!r}")
    rc, out = run([z, "checkpoint", "export", ck, "--out", os.path.join(work, "g.safetensors")], timeout=30)
    check(rc == 1 and "not a regular file" in out, f"FIFO shard, export: {rc} {out[-300:]!r}")
    os.unlink(shard)
    os.rename(shard + ".keep", shard)

    # Export: an existing file needs --force; a device, a FIFO and the checkpoint's own shard never.
    out_path = os.path.join(work, "m.safetensors")
    check(run([z, "checkpoint", "export", ck, "--out", out_path])[0] == 0, "first export")
    rc, out = run([z, "checkpoint", "export", ck, "--out", out_path])
    check(rc == 1 and "--force" in out, f"export over an existing file without --force: {rc} {out!r}")
    check(run([z, "checkpoint", "export", ck, "--out", out_path, "--force"])[0] == 0, "export --force")
    fifo = os.path.join(work, "fifo.safetensors")
    os.mkfifo(fifo)
    for target, needle in [("/dev/null", "device"), (fifo, "FIFO"), (shard, "own file")]:
        rc, out = run([z, "checkpoint", "export", ck, "--out", target, "--force"], timeout=30)
        check(rc == 1 and needle in out, f"export --out {target}: {rc} {out!r}")
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced")
    check(run([z, "checkpoint", "inspect", ck, "--verify"])[0] == 0, "the checkpoint is damaged after the refusals")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
