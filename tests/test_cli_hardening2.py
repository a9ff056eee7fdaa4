#!/usr/bin/env python3
"""Issue 23 (hardening, round 2) where users meet it, the zinc program:

  export --format llmc: an existing --out needs --force; a link, FIFO, device node, the checkpoint's own
      files (shard, manifest, latest, zinc_gpt2.json) are never replaced; no predictable temporary name;
      no leftovers;
  inputs: a FIFO as --init/--data/--val-data/--text is refused at once (never blocks), a directory is
      "is a directory";
  the GPT-2 shape is sealed in the checkpoint: --resume with another --heads and export --vocab/--heads that
      disagree are refused naming both values; an edited zinc_gpt2.json changes nothing;
  messages: a negative token count names the real file size; a checkpoint beyond --steps prints no negative
      rates; a run whose every step was skipped exits 1 and still writes its report; `latest` a directory;
  refusals: --report naming --init, --init with --resume, train_batch_size 2^31, a relative nvme_path, a
      static loss scale of 1e-300, fp16.min_loss_scale 0 with dynamic scaling (as DeepSpeed 0.19.8); accepted
      with a static scale;
  NVMe swap files: removed on SIGTERM and SIGINT (the run stops at a step boundary, exit 115); a dead run's left-over directory removed at the next start.

  test_cli_hardening2.py --zinc build/zinc --configs ds_configs --workdir DIR"""
import argparse
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

import checks
from checks import check


def run(args, timeout=120):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", ""


def write_tokens(path, toks, count=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks) if count is None else count] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def leftovers(d):
    return [n for n in os.listdir(d) if n.endswith(".tmp") or ".zinc-export-" in n or ".tmp" in n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    w = lambda n: os.path.join(work, n)
    cfg = w("c.json")
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 1}},
              open(cfg, "w"))
    text = "".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(4000))
    open(w("t.txt"), "w").write(text)
    write_tokens(w("tok.bin"), [ord(c) for c in text])
    g = [z, "train", "--model", "gpt2", "--quiet", "--threads", "1", "--config", cfg]
    shape = ["--layers", "1", "--width", "16", "--heads", "2", "--context", "8"]

    # ---- a GPT-2 checkpoint to export
    ck = w("ck")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "2", "--save", ck] + shape)
    check(rc == 0, f"train --save: {out[-400:]}")
    ex = [z, "checkpoint", "export", "--format", "llmc", ck, "--out"]
    rc, out = run(ex + [w("m.bin")])
    check(rc == 0, f"export: {out[-300:]}")
    good = open(w("m.bin"), "rb").read() if os.path.exists(w("m.bin")) else b""
    rc, out = run(ex + [w("m.bin")])
    check(rc == 1 and "--force" in out, f"export over an existing file without --force: {rc} {out[-300:]!r}")
    rc, out = run(ex + [w("m.bin"), "--force"])
    check(rc == 0, f"export --force: {rc} {out[-300:]}")
    victim = w("victim.txt")
    open(victim, "w").write("precious\n")
    os.symlink(victim, w("link.bin"))
    os.mkfifo(w("fifo.bin"))
    # the old exporter's predictable temporary names, planted as links
    os.symlink(victim, w("new.bin.tmp"))
    os.symlink(victim, w("new.bin.export-tmp"))
    targets = [(w("link.bin"), "symbolic link"), (w("fifo.bin"), "FIFO"),
               (os.path.join(ck, "latest"), "inputs"), (os.path.join(ck, "zinc_gpt2.json"), "inputs"),
               (os.path.join(ck, "step2", "manifest.json"), "reads"),
               (os.path.join(ck, "step2", "rank00000.zshard"), "reads")]
    if os.geteuid() == 0:
        os.mknod(w("full"), 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # a /dev/full of our own
        targets.append((w("full"), "device"))
    clobbered = 0
    for t, needle in targets:
        rc, out = run(ex + [t, "--force"], timeout=30)
        check(rc == 1 and needle in out, f"export --out {t}: {rc} {out[-300:]!r}")
    rc, out = run(ex + [w("new.bin")], timeout=30)
    check(rc == 0, f"export beside planted temporary names: {rc} {out[-300:]!r}")
    check(open(victim).read() == "precious\n", "the link's target was written")
    clobbered += open(victim).read() != "precious\n"
    check(stat.S_ISFIFO(os.lstat(w("fifo.bin")).st_mode), "the FIFO was replaced")
    if os.geteuid() == 0:
        check(stat.S_ISCHR(os.lstat(w("full")).st_mode), "the device node was replaced")
    rc, out = run([z, "checkpoint", "inspect", ck, "--verify"])
    check(rc == 0, f"the checkpoint was damaged by the refused exports: {out[-300:]}")
    planted = {"new.bin.tmp", "new.bin.export-tmp"}
    extra = [n for n in leftovers(work) if n not in planted] + [n for n in leftovers(ck) if n not in planted]
    check(not extra, f"leftovers: {extra}")
    # the sealed shape: flags that disagree are refused, naming both values
    rc, out = run(ex + [w("v.bin"), "--vocab", "100"])
    check(rc == 2 and "--vocab 100" in out and "256" in out, f"export --vocab 100: {rc} {out[-300:]!r}")
    rc, out = run(ex + [w("v.bin"), "--heads", "4"])
    check(rc == 2 and "--heads 4" in out and "--heads 2" in out, f"export --heads 4: {rc} {out[-300:]!r}")
    sc = os.path.join(ck, "zinc_gpt2.json")
    j = json.load(open(sc))
    j["heads"] = 1
    json.dump(j, open(sc, "w"))  # an edited sidecar is not the model's shape
    rc, out = run(ex + [w("e.bin")])
    hdr = struct.unpack("<8i", open(w("e.bin"), "rb").read(32)) if rc == 0 else None
    check(rc == 0 and hdr and hdr[5] == 2, f"export after editing zinc_gpt2.json: {rc} header {hdr}")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "3", "--resume", ck, "--heads", "4"])
    check(rc == 1 and "--heads 4" in out and "--heads 2" in out, f"--resume with another --heads: {rc} {out[-300:]!r}")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "3", "--resume", ck, "--report", w("res.json")])
    check(rc == 0 and json.load(open(w("res.json")))["shape"]["heads"] == 2,
          f"--resume takes the sealed shape: {rc} {out[-300:]!r}")

    # ---- plots: their data, script and picture through the safe writer (a planted link is refused)
    os.symlink(victim, w("plot.svg.dat"))
    rc, out = run([z, "mem", "estimate", "--params", "1000000", "--largest-layer", "10000", "--device", "cpu",
                   "--plot", w("plot.svg")])
    check(rc != 0 and "symbolic link" in out and open(victim).read() == "precious\n",
          f"mem --plot over a planted link: {rc} {out[-300:]!r}")

    # ---- inputs: FIFOs never block, directories are named
    os.mkfifo(w("in.fifo"))
    os.mkdir(w("adir"))
    hangs = 0
    for flag in ["--init", "--data", "--val-data", "--text"]:
        args = g + ["--steps", "1"] + (["--text", w("t.txt")] if flag in ("--init", "--val-data") else []) + \
            [flag, w("in.fifo")]
        t0 = time.time()
        rc, out = run(args, timeout=20)
        hangs += rc == "hang"
        check(rc == 1 and "FIFO" in out and time.time() - t0 < 20, f"{flag} FIFO: {rc} {out[-300:]!r}")
    rc, out = run([z, "mem", "estimate", "--shapes", w("in.fifo")], timeout=20)
    hangs += rc == "hang"
    check(rc not in (0, "hang") and "FIFO" in out, f"mem estimate --shapes FIFO: {rc} {out[-300:]!r}")
    rc, out = run(g + ["--steps", "1", "--data", w("adir")])
    check(rc == 1 and "is a directory" in out, f"--data DIR: {rc} {out[-300:]!r}")

    # ---- messages
    write_tokens(w("neg.bin"), [1, 2, 3], count=-5)
    rc, out = run(g + ["--steps", "1", "--data", w("neg.bin")])
    check(rc == 1 and "negative" in out and "1030 bytes" in out, f"negative token count: {rc} {out[-300:]!r}")
    m = [z, "train", "--config", cfg, "--quiet", "--threads", "1"]
    rc, out = run(m + ["--steps", "4", "--save", w("ckm")])
    check(rc == 0, f"mlp --save: {out[-300:]}")
    rc, out = run(m + ["--steps", "2", "--resume", w("ckm")])
    check(rc == 0 and "no steps run" in out and "samples/s" not in out and "0.0000 -> 0.0000" not in out,
          f"checkpoint beyond --steps: {rc} {out[-400:]!r}")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "1", "--width", "65536", "--heads", "1", "--layers", "1"],
                  timeout=300)
    check(rc == 1 and "building the model failed: \n" not in out and "failed: \n" not in out,
          f"--width 65536: {rc} {out[-400:]!r}")
    # every step skipped: an fp16 model with a NaN weight (--init) skips every step (a non-finite gradient
    # lowers the loss scale); it used to exit 0, and its report (NaN losses) "could not be written"
    nanm = bytearray(good)
    nanm[1024:1028] = struct.pack("<f", float("nan"))
    open(w("nan.bin"), "wb").write(bytes(nanm))
    f16 = w("f16.json")
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
               "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 8},
               "zero_optimization": {"stage": 2}}, open(f16, "w"))
    rc, out = run([z, "train", "--model", "gpt2", "--quiet", "--threads", "1", "--config", f16, "--text", w("t.txt"),
                   "--init", w("nan.bin"), "--steps", "3", "--report", w("nan.json")])
    check(rc == 1 and "all 3 steps of this run were skipped" in out, f"all steps skipped: {rc} {out[-400:]!r}")
    try:
        check(json.load(open(w("nan.json")))["steps_skipped"] == 3, "the report of the skipped run")
    except (OSError, ValueError) as e:
        check(False, f"no report of the skipped run: {e}")
    os.makedirs(w("ckl"))
    shutil.copytree(os.path.join(ck, "step2"), os.path.join(w("ckl"), "step2"))
    os.mkdir(os.path.join(w("ckl"), "latest"))
    rc, out = run([z, "checkpoint", "inspect", w("ckl")])
    check(rc == 1 and "is a directory" in out and "neither" not in out, f"latest a directory: {rc} {out[-300:]!r}")

    # ---- refusals
    open(w("init.bin"), "wb").write(good)
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "1", "--init", w("init.bin"), "--report", w("init.bin"),
                       "--force"])
    check(rc == 1 and "inputs" in out and open(w("init.bin"), "rb").read() == good,
          f"--report naming --init: {rc} {out[-300:]!r}")
    clobbered += open(w("init.bin"), "rb").read() != good
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "1", "--init", w("init.bin"), "--resume", ck])
    check(rc == 2 and "--init" in out and "--resume" in out, f"--init with --resume: {rc} {out[-300:]!r}")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "1", "--report", w("res.json")] + shape)
    check(rc == 1 and "--force" in out, f"--report over an existing file without --force: {rc} {out[-300:]!r}")
    for body, needle in [({"train_batch_size": 2 ** 31}, "2^24"),
                         ({"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {
                             "device": "nvme", "nvme_path": "rel/dir"}}}, "relative"),
                         ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 1e-300}}, "2^-24"),
                         # DeepSpeed 0.19.8 refuses a dynamic scale without a floor (DeepSpeedFP16Config)
                         ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 0, "min_loss_scale": 0}},
                          "allowed: 1 or more")]:
        json.dump(body, open(w("bad.json"), "w"))
        rc, out = run([z, "config", "check", w("bad.json")])
        check(rc != 0 and needle in out, f"config check {body}: {rc} {out[-300:]!r}")
    json.dump({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 128, "min_loss_scale": 0}},
              open(w("ok.json"), "w"))
    rc, out = run([z, "config", "check", w("ok.json")])
    check(rc == 0, f"config check fp16.min_loss_scale 0 with a static scale: {rc} {out[-300:]!r}")

    # ---- NVMe swap directories: removed on SIGTERM and SIGINT, and a dead run's removed at the next start
    nv = w("nvme")
    json.dump({"train_batch_size": 4, "zero_optimization": {"stage": 2, "sub_group_size": 4096, "offload_optimizer": {
        "device": "nvme", "nvme_path": nv}}, "zinc": {"allow_buffered_io": True}}, open(w("nv.json"), "w"))
    left = 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        p = subprocess.Popen([z, "train", "--config", w("nv.json"), "--quiet", "--threads", "1", "--steps", "100000",
                              "--hidden", "256"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.time()
        while time.time() - t0 < 60 and not (os.path.isdir(nv) and any(n.startswith("zinc-") for n in os.listdir(nv))):
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(sig)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            check(False, f"{sig.name}: the run did not end")
        runs = [n for n in os.listdir(nv) if n.startswith("zinc-")] if os.path.isdir(nv) else ["(none made)"]
        left += len(runs)
        # zinc train stops at the step boundary (issue 27): exit 115 without --save (tests/test_preempt.py)
        check(not runs and p.returncode == 115, f"{sig.name}: exit {p.returncode}, left {runs}")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = os.path.join(nv, "zinc-%d-0badcafe" % dead.pid)
    os.makedirs(os.path.join(stale, "rank0"))
    open(os.path.join(stale, "rank0", "master.bin"), "wb").write(b"x" * 4096)
    rc, out = run([z, "train", "--config", w("nv.json"), "--threads", "1", "--steps", "1"])
    check(rc == 0 and not os.path.exists(stale) and "removed" in out, f"stale run directory: {rc} {out[-300:]!r}")
    left += os.path.exists(stale)

    print(f"sweep: {hangs} hang(s), {clobbered} clobbered file(s), {left} left-over swap director(ies)")
    print(f"{checks.failures} failure(s)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
