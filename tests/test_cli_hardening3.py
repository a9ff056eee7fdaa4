#!/usr/bin/env python3
"""Issue 42 (hardening, round 3) through the zinc program:

  clobber: --report and --trace naming the run's own checkpoint files (--save DIR/latest, a manifest, a
      shard, a file under a link to DIR, the --resume directory) are refused before training, even with
      --force, naming the directory; the checkpoint still verifies;
  tracefull: a --trace on a full file system (a 16 KiB tmpfs, as root; else skipped with the reason) is a
      warning: the run exits 0, its checkpoint verifies and its report is written;
  keep: --keep-last reads only canonical step<N> tags (a copy named step05 is kept and takes no slot), a
      stale step500 newer than `latest` takes no slot; a killed run's .stepN.removing and .TAG.partial
      directories are gone after the next start, even one refused before its first step;
  numbers: zinc mem estimate --nodes x --gpus-per-node past 2^20 ranks refused (an int product wrapped);
  links: a link on the way to --trace, --save, --report or csv_monitor's output_path in a directory other
      users can write (not sticky) is refused naming the link, nothing made at its target; a private one works;
  signals: SIGTERM or SIGUSR1 sent 0, 1, 5, 20 and 50 ms after the process starts, held blocked across exec
      by the parent (so "0 ms" is before zinc's first instruction: the dynamic loader's few milliseconds
      before main are no code of zinc's, and only a parent that blocks the signals covers them), gives exit
      115 "stopped before the first step" or at it: never a death by the signal, never a signal lost; one
      SIGTERM ends a run whose --config is a FIFO nobody writes (exit 115), and a FIFO that is written
      still works.

  test_cli_hardening3.py --zinc build/zinc --workdir DIR [--part NAME]"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import checks
from checks import check


def run(args, timeout=120, **kw):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, **kw)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", ""


def config(path, extra=None):
    c = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
         "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 1}}
    c.update(extra or {})
    json.dump(c, open(path, "w"))
    return path


def verified(z, ck):
    rc, out = run([z, "checkpoint", "inspect", ck, "--verify"])
    return rc == 0, out


def clobber_part(z, work):
    cfg = config(os.path.join(work, "c.json"))
    ck = os.path.join(work, "ck")
    base = [z, "train", "--config", cfg, "--threads", "1", "--quiet"]
    rc, out = run(base + ["--steps", "2", "--save", ck])
    check(rc == 0, f"the checkpoint to protect: {rc} {out[-400:]}")
    latest = open(os.path.join(ck, "latest")).read()
    tag = latest.strip()
    os.symlink(ck, os.path.join(work, "via_link"))
    shard = [n for n in os.listdir(os.path.join(ck, tag)) if n.endswith(".zshard")][0]
    targets = [("--report", os.path.join(ck, "latest"), "--save"),
               ("--trace", os.path.join(ck, "latest"), "--save"),
               ("--report", os.path.join(ck, tag, "manifest.json"), "--save"),
               ("--trace", os.path.join(ck, tag, shard), "--save"),
               ("--report", os.path.join(work, "via_link", "latest"), "--save"),
               ("--report", os.path.join(ck, "new_report.json"), "--save"),
               ("--trace", os.path.join(ck, "step4", "t.json"), "--save")]
    for flag, target, names in targets:
        rc, out = run(base + ["--steps", "4", "--save", ck, "--resume", ck, flag, target, "--force"])
        check(rc == 1 and "inside the" in out and names in out and "even with --force" in out,
              f"{flag} {target}: exit {rc}, {out[-400:]!r}")
    # the --resume directory, when the run saves elsewhere
    ck2 = os.path.join(work, "ck2")
    rc, out = run(base + ["--steps", "4", "--save", ck2, "--resume", ck, "--report", os.path.join(ck, "latest"),
                          "--force"])
    check(rc == 1 and "--resume directory" in out, f"--report in the --resume directory: {rc} {out[-400:]!r}")
    check(open(os.path.join(ck, "latest")).read() == latest, "ck/latest was rewritten")
    ok, out = verified(z, ck)
    check(ok, f"the checkpoint no longer verifies: {out[-400:]}")
    # --trace and --report naming one file (the one written last would replace the other)
    same = os.path.join(work, "both.json")
    rc, out = run(base + ["--steps", "4", "--save", ck, "--resume", ck, "--report", same, "--trace",
                          os.path.join(work, ".", "both.json"), "--force"])
    check(rc == 1 and "name the same file" in out, f"--trace and --report the same file: {rc} {out[-300:]!r}")
    # outside the checkpoint directories both are still written
    rc, out = run(base + ["--steps", "4", "--save", ck, "--resume", ck, "--report", os.path.join(work, "r.json"),
                          "--trace", os.path.join(work, "t.json")])
    check(rc == 0 and os.path.exists(os.path.join(work, "r.json")) and os.path.exists(os.path.join(work, "t.json")),
          f"report and trace beside the checkpoint: {rc} {out[-400:]}")


def tracefull_part(z, work):
    if os.geteuid() != 0:
        print("tracefull: skipped: mounting a small tmpfs needs root")
        return
    mnt = os.path.join(work, "tiny")
    os.makedirs(mnt)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", mnt], stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"tracefull: skipped: cannot mount a tmpfs: {p.stderr.strip()}")
        return
    try:
        open(os.path.join(mnt, "filler"), "wb").write(b"x" * 12288)  # leaves about 4 KiB: the trace needs more
        cfg = config(os.path.join(work, "c.json"))
        ck, rep = os.path.join(work, "ck"), os.path.join(work, "r.json")
        trace = os.path.join(mnt, "t.json")
        rc, out = run([z, "train", "--config", cfg, "--threads", "1", "--steps", "6", "--save", ck, "--report", rep,
                       "--trace", trace, "--trace-steps", "2:4"])
        check(rc == 0, f"a trace that cannot be written failed the run: exit {rc}: {out[-600:]}")
        check("was not written" in out and "training goes on" in out, f"no warning about the trace: {out[-600:]}")
        check(not os.path.exists(trace), "a partial trace was left")
        check(os.path.exists(rep), "the report was lost")
        ok, vout = verified(z, ck)
        check(ok, f"the checkpoint was lost: {vout[-300:]}")
        check(open(os.path.join(ck, "latest")).read().strip() == "step6", "the final checkpoint is not step6")
        check(not [n for n in os.listdir(mnt) if n.endswith(".tmp")], "a temporary trace file was left on the disk")
    finally:
        subprocess.run(["umount", mnt])


def keep_part(z, work):
    cfg = config(os.path.join(work, "c.json"))
    ck = os.path.join(work, "ck")
    base = [z, "train", "--config", cfg, "--threads", "1", "--quiet", "--save", ck]
    rc, out = run(base + ["--steps", "2"])
    check(rc == 0, f"first run: {out[-300:]}")
    shutil.copytree(os.path.join(ck, "step2"), os.path.join(ck, "step05"))  # a user's copy, not step 5
    shutil.copytree(os.path.join(ck, "step2"), os.path.join(ck, "step500"))  # a longer run's, left behind
    rc, out = run(base + ["--steps", "8", "--resume", ck, "--save-every", "2", "--keep-last", "2"])
    check(rc == 0, f"--keep-last run: {rc} {out[-400:]}")
    tags = sorted(n for n in os.listdir(ck) if n.startswith("step"))
    check(tags == ["step05", "step500", "step6", "step8"], f"tags kept: {tags} (want step05 step500 step6 step8)")
    check(open(os.path.join(ck, "latest")).read().strip() == "step8", "latest is not step8")
    # a killed run's leftovers are gone after the next start, even one refused before any save
    for n in [".step4.removing", ".step9.partial"]:
        os.makedirs(os.path.join(ck, n, "sub"))
        open(os.path.join(ck, n, "sub", "f"), "w").write("x")
    rc, out = run(base + ["--steps", "10", "--resume", ck, "--report", os.path.join(work, "no", "such", "r.json")])
    check(rc == 1 and "nothing was trained" in out, f"the refused run: {rc} {out[-400:]}")
    left = [n for n in os.listdir(ck) if n.endswith(".removing") or n.endswith(".partial")]
    check(not left, f"left over after the next start: {left}")
    ok, out = verified(z, ck)
    check(ok, f"the checkpoint after the sweep: {out[-300:]}")


def spawn_blocked(args, sigs):
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def signals_part(z, work):
    cfg = config(os.path.join(work, "c.json"))
    sigs = {signal.SIGTERM, signal.SIGUSR1, signal.SIGINT}
    for sig in [signal.SIGUSR1, signal.SIGTERM]:
        for ms in [0, 1, 5, 20, 50]:
            p = spawn_blocked([z, "train", "--config", cfg, "--threads", "1", "--steps", "3000", "--quiet"], sigs)
            time.sleep(ms / 1000)
            p.send_signal(sig)
            try:
                out = p.communicate(timeout=120)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                p.kill()
                out = "hang"
            # held since before exec: zinc must take it once its handlers are on (115), neither die of it (a
            # negative status) nor lose it (0: the run ignored the scheduler's warning)
            check(p.returncode == 115 and "stopped" in out,
                  f"{sig.name} at {ms} ms: exit {p.returncode} (want 115; negative = killed): {out[-300:]!r}")
    # one SIGTERM ends a run waiting for a FIFO config's writer
    fifo = os.path.join(work, "cfg.fifo")
    os.mkfifo(fifo)
    p = subprocess.Popen([z, "train", "--config", fifo, "--threads", "1", "--steps", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    try:
        out = p.communicate(timeout=20)[0].decode(errors="replace")
        check(p.returncode == 115 and "stopped by signal" in out,
              f"--config FIFO after one SIGTERM: exit {p.returncode}: {out[-300:]!r}")
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        check(False, "one SIGTERM did not stop a run waiting on --config FIFO")
    # a FIFO that is written still works (a config through a pipe)
    p = subprocess.Popen([z, "train", "--config", fifo, "--threads", "1", "--steps", "1", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(0.3)
    with open(fifo, "w") as f:
        f.write(open(cfg).read())
    out = p.communicate(timeout=120)[0].decode(errors="replace")
    check(p.returncode == 0, f"--config FIFO with a writer: exit {p.returncode}: {out[-300:]!r}")


def links_part(z, work):
    """A link on the way to --trace, --save or csv_monitor's output_path, in a directory other users can write
    (0775, not sticky), is refused naming it, and nothing is made at its target; through a link of a private
    directory the same run works."""
    target, shared, private = (os.path.join(work, n) for n in ("target", "shared", "private"))
    for d in (target, shared, private):
        os.makedirs(d)
    os.chmod(shared, 0o775)
    os.symlink(target, os.path.join(shared, "run"))
    os.symlink(target, os.path.join(private, "run"))
    cfg = config(os.path.join(work, "c.json"))
    base = [z, "train", "--config", cfg, "--threads", "1", "--steps", "2", "--quiet"]
    for extra in (["--trace", os.path.join(shared, "run", "t.json")], ["--save", os.path.join(shared, "run", "ck")],
                  ["--report", os.path.join(shared, "run", "r.json")]):
        rc, out = run(base + extra)
        check(rc == 1 and "symbolic link" in out and os.path.join(shared, "run") in out,
              f"{extra[0]} through a link in a shared directory: exit {rc}: {out[-400:]!r}")
    mon = config(os.path.join(work, "m.json"), {"csv_monitor": {"enabled": True, "job_name": "j",
                                                               "output_path": os.path.join(shared, "run", "csv")}})
    rc, out = run([z, "train", "--config", mon, "--threads", "1", "--steps", "2", "--quiet"])
    check(rc == 1 and "symbolic link" in out, f"csv_monitor through a link in a shared directory: {rc} {out[-400:]!r}")
    check(os.listdir(target) == [], f"made through the refused links: {os.listdir(target)}")
    rc, out = run(base + ["--trace", os.path.join(private, "run", "t.json"), "--save", os.path.join(private, "run", "ck")])
    check(rc == 0 and os.path.exists(os.path.join(target, "t.json")), f"through a private link: {rc} {out[-400:]!r}")


def numbers_part(z, work):
    """Products of options each in range: --nodes 2^20 x --gpus-per-node 2^16 is 2^36 ranks (an int product
    wraps to 0); refused naming both, exit 2."""
    rc, out = run([z, "mem", "estimate", "--params", "1000000", "--nodes", "1048576", "--gpus-per-node", "65536"])
    check(rc == 2 and "68719476736 ranks" in out and "2^20" in out, f"nodes x gpus per node: {rc} {out[-300:]!r}")
    rc, out = run([z, "mem", "estimate", "--params", "1000000", "--nodes", "1024", "--gpus-per-node", "1024"])
    check(rc == 0, f"2^20 ranks: {rc} {out[-300:]!r}")


PARTS = {"numbers": numbers_part, "links": links_part, "clobber": clobber_part, "tracefull": tracefull_part, "keep": keep_part, "signals": signals_part}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--part", choices=sorted(PARTS), action="append")
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    for part in a.part or sorted(PARTS):
        d = os.path.join(work, part)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        PARTS[part](z, d)
        print(f"{part}: done ({checks.failures} failures so far)", flush=True)
    print("FAIL" if checks.failures else "ok", f"({checks.failures} failures)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
