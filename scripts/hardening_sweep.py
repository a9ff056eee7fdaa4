#!/usr/bin/env python3
"""The issue-23 sweep: runs a zinc binary through the hostile inputs of issue 23 and counts crashes (killed by
a signal other than the one sent), hangs (no exit within 10 s), silent wrong loads (exit 0 where the run should
have been refused or used another shape), clobbered files (a file, link, FIFO or device that was not to be
replaced, changed) and leftovers (swap directories, temporary files). Used to compare a build before and after
the fix; the counts it prints are quoted in the issue's note.

  scripts/hardening_sweep.py --zinc build/zinc --workdir /tmp/sweep"""
import argparse
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import time

cnt = {"runs": 0, "crashes": 0, "hangs": 0, "silent": 0, "clobbered": 0, "leftovers": 0}
log = []


def run(args, timeout=10):
    cnt["runs"] += 1
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        cnt["hangs"] += 1
        log.append(("hang", args[1:]))
        return "hang", ""
    if p.returncode < 0 or p.returncode in (134, 139):
        cnt["crashes"] += 1
        log.append(("crash", args[1:]))
    return p.returncode, p.stdout.decode(errors="replace")


def snap(p):
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    data = open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None
    return (stat.S_IFMT(st.st_mode), data, os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)


def bad(kind, what):
    cnt[kind] += 1
    log.append((kind, what))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    w = lambda n: os.path.join(work, n)
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
               "zero_optimization": {"stage": 1}}, open(w("c.json"), "w"))
    text = "".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(4000))
    open(w("t.txt"), "w").write(text)
    g = [z, "train", "--model", "gpt2", "--quiet", "--threads", "1", "--config", w("c.json")]
    shape = ["--layers", "1", "--width", "16", "--heads", "2", "--context", "8"]
    ck = w("ck")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "2", "--save", ck] + shape, timeout=120)
    assert rc == 0, out
    ex = [z, "checkpoint", "export", "--format", "llmc", ck, "--out"]
    assert run(ex + [w("m.bin")], timeout=60)[0] == 0
    model = open(w("m.bin"), "rb").read()

    # 1. export targets that must not be replaced (no --force: the old exporter did not know it)
    open(w("victim"), "w").write("precious\n")
    open(w("existing.bin"), "w").write("mine\n")
    os.symlink(w("victim"), w("link.bin"))
    os.mkfifo(w("fifo.bin"))
    targets = [w("existing.bin"), w("link.bin"), w("fifo.bin"), os.path.join(ck, "latest"),
               os.path.join(ck, "zinc_gpt2.json"), os.path.join(ck, "step2", "manifest.json"),
               os.path.join(ck, "step2", "rank00000.zshard")]
    if os.geteuid() == 0:
        os.mknod(w("full"), 0o600 | stat.S_IFCHR, os.makedev(1, 7))
        targets.append(w("full"))
    for t in targets:
        before, vb = snap(t), snap(w("victim"))
        run(ex + [t], timeout=10)
        if snap(t) != before or snap(w("victim")) != vb:
            bad("clobbered", f"export --out {t}")
    # a planted link at the old exporter's predictable temporary names
    open(w("victim2"), "w").write("precious\n")
    os.symlink(w("victim2"), w("new.bin.tmp"))
    os.symlink(w("victim2"), w("new.bin.export-tmp"))
    run(ex + [w("new.bin")], timeout=10)
    if open(w("victim2")).read() != "precious\n":
        bad("clobbered", "export through a planted temporary link")

    # 2. inputs: FIFOs and a directory
    os.mkfifo(w("in.fifo"))
    for flag in ["--init", "--data", "--val-data", "--text"]:
        extra = ["--text", w("t.txt")] if flag in ("--init", "--val-data") else []
        run(g + ["--steps", "1"] + extra + [flag, w("in.fifo")], timeout=10)
    run([z, "mem", "estimate", "--shapes", w("in.fifo")], timeout=10)
    os.mkdir(w("adir"))
    rc, out = run(g + ["--steps", "1", "--data", w("adir")])
    if "is a directory" not in out:
        log.append(("message", f"--data DIR: {out.strip()[-120:]}"))

    # 3. silent wrong loads and runs that go bad with exit 0 (on a fresh checkpoint: section 1 may have broken ck)
    ck = w("ck2")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "2", "--save", ck] + shape, timeout=120)
    assert rc == 0, out
    ex = [z, "checkpoint", "export", "--format", "llmc", ck, "--out"]
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "3", "--resume", ck, "--heads", "4"], timeout=60)
    if rc == 0:
        bad("silent", "--resume with another --heads")
    rc, out = run(ex + [w("v100.bin"), "--vocab", "100"], timeout=60)
    if rc == 0:
        bad("silent", "export --vocab 100 of a vocabulary-256 checkpoint")
    sc = os.path.join(ck, "zinc_gpt2.json")
    j = json.load(open(sc))
    j["heads"] = 1
    json.dump(j, open(sc, "w"))
    rc, out = run(ex + [w("edited.bin")], timeout=60)
    if rc == 0 and struct.unpack("<8i", open(w("edited.bin"), "rb").read(32))[5] == 1:
        bad("silent", "export took an edited zinc_gpt2.json")
    open(w("init.bin"), "wb").write(model)
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "3", "--init", w("init.bin"), "--resume", ck], timeout=60)
    if rc == 0:
        bad("silent", "--init with --resume accepted")
    rc, out = run(g + ["--text", w("t.txt"), "--steps", "1", "--init", w("init.bin"), "--report", w("init.bin")],
                  timeout=60)
    if open(w("init.bin"), "rb").read() != model:
        bad("clobbered", "--report naming --init")
    nan = bytearray(model)
    nan[1024:1028] = struct.pack("<f", float("nan"))
    open(w("nan.bin"), "wb").write(bytes(nan))
    json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
               "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 8}, "zero_optimization": {"stage": 2}},
              open(w("f16.json"), "w"))
    rc, out = run([z, "train", "--model", "gpt2", "--quiet", "--threads", "1", "--config", w("f16.json"), "--text",
                   w("t.txt"), "--init", w("nan.bin"), "--steps", "3"], timeout=60)
    if rc == 0:
        bad("silent", "an fp16 run whose every step was skipped exited 0")
    for body in [{"train_batch_size": 2 ** 31},
                 {"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {
                     "device": "nvme", "nvme_path": "rel"}}},
                 {"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 1e-300}}]:
        json.dump(body, open(w("bad.json"), "w"))
        if run([z, "config", "check", w("bad.json")])[0] == 0:
            bad("silent", f"config check accepted {body}")

    # 4. leftovers: NVMe swap directories after SIGTERM/SIGINT and of a dead run; temporary files
    nv = w("nvme")
    json.dump({"train_batch_size": 4, "zero_optimization": {"stage": 2, "sub_group_size": 4096, "offload_optimizer": {
        "device": "nvme", "nvme_path": nv}}, "zinc": {"allow_buffered_io": True}}, open(w("nv.json"), "w"))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        cnt["runs"] += 1
        p = subprocess.Popen([z, "train", "--config", w("nv.json"), "--quiet", "--threads", "1", "--steps", "100000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while time.time() - t0 < 60 and not (os.path.isdir(nv) and os.listdir(nv)):
            time.sleep(0.1)
        time.sleep(0.5)
        p.send_signal(sig)
        p.wait(timeout=60)
        left = [n for n in os.listdir(nv) if n.startswith("zinc-")]
        if left:
            bad("leftovers", f"{sig.name}: {left}")
            for n in left:
                shutil.rmtree(os.path.join(nv, n), ignore_errors=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    os.makedirs(os.path.join(nv, "zinc-%d-0badcafe" % dead.pid, "rank0"))
    run([z, "train", "--config", w("nv.json"), "--quiet", "--threads", "1", "--steps", "1"], timeout=60)
    if os.path.exists(os.path.join(nv, "zinc-%d-0badcafe" % dead.pid)):
        bad("leftovers", "a dead run's swap directory")
    planted = {"new.bin.tmp", "new.bin.export-tmp"}
    for d in (work, ck):
        for n in os.listdir(d):
            if n not in planted and (".tmp" in n or "export-tmp" in n or ".zinc-export-" in n):
                bad("leftovers", os.path.join(d, n))

    print(json.dumps(cnt))
    for k, v in log:
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
