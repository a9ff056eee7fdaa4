#!/usr/bin/env python3
"""zinc train --model gpt2 and zinc checkpoint export --format llmc end to end (standard library only).

  errors:  a truncated or wrong-magic checkpoint or token file, a vocabulary/shape mismatch between --init
           and the flags, a token id >= vocabulary, a context longer than the checkpoint's: each exits 1
           with a message naming the file, the field and the expected value;
  resume:  --save-every then --resume (shape from zinc_gpt2.json) ends bitwise where the uninterrupted run
           does, with one loss per step it ran;
  files:   an llm.c model file (written here with struct, from the format facts) --init'ed, saved after 0
           steps and exported with --format llmc comes back byte for byte (version 3); a bf16 export
           (version 5) is the round-to-nearest-even of it and trains again through --init;
  matrix:  (--matrix) a tiny GPT-2 trained 20 steps at ZeRO stages 0-3 x 1-3 ranks x fp32/bf16/fp16 (batch
           12 = micro 2 x accumulation x ranks) against the 1-rank stage-0 run of its dtype: every step's
           loss within 1e-6 relative (fp32; seen: 0 at 1 rank, <= 4e-9 at 2-3 ranks), 1e-3 (bf16; seen
           <= 1e-4) and 1e-4 (fp16; seen <= 4e-6): reduction order changes with the rank count, and 16-bit
           gradients round differently; and the 1-rank stage-0 loss falls; optimizer state offloaded to CPU
           memory (stage 2) and NVMe (stage 3) at 2 ranks within the fp32 tolerance; --shuffle gives the
           same batches on 1 and 2 ranks, and other batches than the file order;
  text:    (--text) trains on a Debian licence text (the MPL-2.0 from base-files) for 60 steps: loss falls by more than 1.0 nat from
           ln(256), the report has one loss per step, a validation loss and a sample.
Exit 0 pass, 1 fail.
"""
import argparse
import json
import math
import os
import random
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
        print(p.stdout[-3000:])
    check(p.returncode == expect, f"exit {p.returncode}, expected {expect}: {' '.join(cmd[-10:])}")
    return p.stdout


def expect_error(cmd, *needles):
    out = run(cmd, expect=1)
    for n in needles:
        check(n in out, f"message lacks {n!r}: {out.strip()[-400:]}")


def nparams(maxT, V, L, H, C, Vp):
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


def write_model(path, maxT, V, L, H, C, Vp, seed=1):
    rnd = random.Random(seed)
    hdr = [20240326, 3, maxT, V, L, H, C, Vp] + [0] * 248
    vals = [rnd.gauss(0, 0.05) for _ in range(nparams(maxT, V, L, H, C, Vp))]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        f.write(struct.pack("<%df" % len(vals), *vals))


def write_tokens(path, toks, magic=20240520):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([magic, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def bf16_round(b):
    out = bytearray()
    for (u,) in struct.iter_unpack("<I", b):
        if (u & 0x7F800000) == 0x7F800000:
            r = u >> 16
        else:
            r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        out += struct.pack("<H", r & 0xFFFF)
    return bytes(out)


def config(path, stage, dtype, micro=2, batch=12, offload=None):
    c = {"train_batch_size": batch, "train_micro_batch_size_per_gpu": micro,
         "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
         "gradient_clipping": 1.0, "zero_optimization": {"stage": stage}, "steps_per_print": 0}
    if offload:
        c["zero_optimization"]["offload_optimizer"] = offload
        c["zero_optimization"]["sub_group_size"] = 4096
    if dtype == "bf16":
        c["bf16"] = {"enabled": True}
    if dtype == "fp16":
        c["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 10}
    with open(path, "w") as f:
        json.dump(c, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--matrix", action="store_true")
    ap.add_argument("--text", default="")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda n: os.path.join(a.workdir, n)
    z = [a.zinc, "train", "--model", "gpt2", "--quiet"]
    config(w("c0.json"), 0, "fp32")

    text = "".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(6000))
    with open(w("t.txt"), "w") as f:
        f.write(text)
    toks = [ord(ch) for ch in text]
    write_tokens(w("tok.bin"), toks)

    if not a.matrix and not a.text:
        # ---- errors
        write_model(w("m.bin"), 16, 256, 2, 2, 16, 256)
        base = z + ["--config", w("c0.json"), "--steps", "1", "--data", w("tok.bin")]
        data = open(w("m.bin"), "rb").read()
        open(w("trunc.bin"), "wb").write(data[:-8])
        expect_error(base + ["--init", w("trunc.bin")], "trunc.bin", "expected %d" % (len(data) - 0))
        open(w("magic.bin"), "wb").write(struct.pack("<i", 1234) + data[4:])
        expect_error(base + ["--init", w("magic.bin")], "magic.bin", "header[0] (magic) is 1234", "expected 20240326")
        expect_error(base + ["--init", w("m.bin"), "--vocab", "300"], "--vocab 300", "m.bin", "header[3]", "give 256")
        expect_error(base + ["--init", w("m.bin"), "--layers", "3"], "--layers 3", "m.bin", "header[4]", "give 2")
        # the device: a bad name, and cuda (the GPU path) refused without the experimental switch
        out = run(base + ["--device", "gpu"], expect=2)
        check("--device must be cpu, cuda or auto" in out, f"--device gpu: {out.strip()[-300:]}")
        os.environ.pop("ZINC_EXPERIMENTAL_CUDA", None)
        expect_error(base + ["--device", "cuda"], "device cuda", "ZINC_EXPERIMENTAL_CUDA=1", "device cpu")
        # outputs are checked before training, and an option without its value is an error
        expect_error(base + ["--report", "/proc/nope/r.json"], "--report /proc/nope/r.json", "nothing was trained")
        out = run(base + ["--save", "--shuffle"], expect=2)
        check("--save needs a value" in out, f"--save without its value: {out.strip()[-300:]}")
        expect_error(base + ["--init", w("m.bin"), "--context", "32"], "--context 32", "m.bin",
                     "header[2] (max context) is 16", "1..16")
        write_tokens(w("big.bin"), toks[:100] + [300] + toks[100:])
        expect_error(z + ["--config", w("c0.json"), "--steps", "1", "--init", w("m.bin"), "--data", w("big.bin")],
                     "big.bin", "token 100 is 300", "vocabulary is 256")
        write_tokens(w("tmagic.bin"), toks, magic=20240326)
        expect_error(z + ["--config", w("c0.json"), "--steps", "1", "--data", w("tmagic.bin")],
                     "tmagic.bin", "header[0] (magic)", "expected 20240520")
        tdata = open(w("tok.bin"), "rb").read()
        open(w("tshort.bin"), "wb").write(tdata[:-10])
        expect_error(z + ["--config", w("c0.json"), "--steps", "1", "--data", w("tshort.bin")],
                     "tshort.bin", "header[2] (token count) is 6000", "should have 13024 bytes")

        # --gemm: a bad name names the choices; both backends train the same model (the report says which
        # ran), losses equal to float rounding (1e-5 relative over 4 steps)
        out = run(base + ["--gemm", "mkl"], expect=2)
        check("--gemm must be auto, openblas or onednn" in out, f"--gemm mkl: {out.strip()[-300:]}")
        gshape = ["--layers", "2", "--width", "32", "--heads", "2", "--context", "16", "--vocab", "128"]
        gl = {}
        for g in ("openblas", "onednn", "auto"):
            p = subprocess.run(z + ["--config", w("c0.json"), "--data", w("tok.bin"), "--steps", "4", "--gemm", g,
                                    "--report", w("g.json"), "--force"] + gshape,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if g == "onednn" and p.returncode == 2 and "libdnnl2" in p.stdout:
                print("--gemm onednn: this build has no oneDNN (refused naming libdnnl-dev)")
                continue
            check(p.returncode == 0, f"--gemm {g}: exit {p.returncode}: {p.stdout.strip()[-300:]}")
            if p.returncode == 0:
                r = json.load(open(w("g.json")))
                check(r["gemm"] == g or (g == "auto" and r["gemm"] in ("openblas", "onednn")),
                      f"--gemm {g}: the report says {r['gemm']}")
                gl[g] = r["losses"]
        if "openblas" in gl and "onednn" in gl:
            d = max(abs(x - y) / abs(y) for x, y in zip(gl["onednn"], gl["openblas"]))
            check(d < 1e-5, f"--gemm onednn losses {gl['onednn']} vs openblas {gl['openblas']} ({d:.2g})")

        # --products: bf16 products with an fp32 config (torch autocast's scheme) change the losses by the
        # operands' rounding only (report "products": "bf16", not bitwise the float run's, within 2e-2 over 4
        # steps); fp32 products with a bf16 config; refused where no bf16 dot products run, naming why
        out = run(base + ["--products", "fp64"], expect=2)
        check("--products must be auto, fp32 or bf16" in out, f"--products fp64: {out.strip()[-300:]}")
        out = run(base + ["--gemm", "openblas", "--products", "bf16"], expect=2)
        check(all(n in out for n in ("--products bf16", "OpenBLAS", "oneDNN", "--products fp32 or auto")),
              f"--products bf16 with --gemm openblas: {out.strip()[-300:]}")
        config(w("cb.json"), 0, "bf16")
        pl, bf16_runs = {}, True
        for cfg, prod, want in (("c0", "auto", "fp32"), ("c0", "bf16", "bf16"), ("cb", "auto", "bf16"),
                                ("cb", "fp32", "fp32")):
            p = subprocess.run(z + ["--config", w(cfg + ".json"), "--data", w("tok.bin"), "--steps", "4",
                                    "--products", prod, "--report", w("p.json"), "--force"] + gshape,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if prod == "bf16" and p.returncode == 2 and "no bf16 dot products here" in p.stdout:
                print("--products bf16: no bf16 dot products on this machine:", p.stdout.strip()[-200:])
                bf16_runs = False  # then auto must choose fp32 products (this CPU lacks AVX-512 bf16)
                continue
            check(p.returncode == 0, f"--products {prod}: exit {p.returncode}: {p.stdout.strip()[-300:]}")
            if p.returncode == 0:
                r = json.load(open(w("p.json")))
                bf16_dot = r["gemm"] == "onednn" and bf16_runs  # else bf16 compute widens into float products
                check(r["products"] == (want if bf16_dot else "fp32"),
                      f"{cfg} --products {prod}: the report says {r['products']}, expected {want}")
                pl[(cfg, prod)] = r["losses"]
        if ("c0", "bf16") in pl:
            f, b = pl[("c0", "auto")], pl[("c0", "bf16")]
            d = max(abs(x - y) / abs(y) for x, y in zip(b, f))
            check(0 < d < 2e-2, f"--products bf16 losses {b} vs fp32 products {f}: max relative {d:.2g}")

        # ---- files: llm.c -> zinc -> llm.c, bitwise
        run(z + ["--config", w("c0.json"), "--steps", "0", "--init", w("m.bin"), "--data", w("tok.bin"),
                 "--save", w("ck0")])
        run([a.zinc, "checkpoint", "export", "--format", "llmc", w("ck0"), "--out", w("back.bin")])
        check(open(w("back.bin"), "rb").read() == data, "export of an --init'ed model is the llm.c file, bitwise")
        run([a.zinc, "checkpoint", "export", "--format", "llmc", w("ck0"), "--out", w("back5.bin"), "--dtype", "bf16"])
        b5 = open(w("back5.bin"), "rb").read()
        hdr5 = list(struct.unpack("<8i", b5[:32]))
        check(hdr5 == [20240326, 5, 16, 256, 2, 2, 16, 256], f"bf16 header {hdr5}")
        check(b5[1024:] == bf16_round(data[1024:]), "bf16 export is the round-to-nearest-even of the fp32 one")
        # a trained model exported, then --init'ed again: the first loss equals the exported model's loss
        rep = w("r1.json")
        run(z + ["--config", w("c0.json"), "--steps", "3", "--init", w("back5.bin"), "--data", w("tok.bin"),
                 "--save", w("ck1"), "--report", rep])
        run([a.zinc, "checkpoint", "export", "--format", "llmc", w("ck1"), "--out", w("m1.bin")])
        r1 = json.load(open(rep))
        check(len(r1["losses"]) == 3, "one loss per step")
        rep2 = w("r2.json")
        run(z + ["--config", w("c0.json"), "--steps", "1", "--init", w("m1.bin"), "--data", w("tok.bin"),
                 "--report", rep2])
        r2 = json.load(open(rep2))
        check(r2["losses"][0] < r1["losses"][0], f"training continues from the exported model: {r2['losses'][0]} "
              f"after {r1['losses']}")
        # --save-every and --resume: the resumed run continues the sequential data and ends bitwise where the
        # uninterrupted one does (same checksum); its report has one loss per step it ran, equal to the
        # uninterrupted run's losses of those steps
        shape = ["--layers", "2", "--width", "16", "--heads", "2", "--context", "8", "--vocab", "128"]
        base = z + ["--config", w("c0.json"), "--data", w("tok.bin")] + shape
        run(base + ["--steps", "6", "--report", w("full.json")])
        run(base + ["--steps", "3", "--save", w("ckr"), "--save-every", "3"])
        run(z + ["--config", w("c0.json"), "--data", w("tok.bin"), "--steps", "6", "--resume", w("ckr"),
                 "--report", w("resumed.json")])
        full, res = json.load(open(w("full.json"))), json.load(open(w("resumed.json")))
        check(res["param_checksum"] == full["param_checksum"], "resumed run ends bitwise where the full run does")
        check(res["losses"] == full["losses"][3:], f"resumed losses {res['losses']} vs {full['losses'][3:]}")
        # the shape is sealed in the checkpoint: export needs no zinc_gpt2.json, and flags that disagree are refused
        os.remove(w("ck1/zinc_gpt2.json"))
        out = run([a.zinc, "checkpoint", "export", "--format", "llmc", w("ck1"), "--out", w("x.bin"), "--vocab", "300"],
                  expect=2)
        check("--vocab 300" in out and "--vocab 256" in out, "export with another --vocab names both values")
        run([a.zinc, "checkpoint", "export", "--format", "llmc", w("ck1"), "--out", w("x.bin"), "--vocab", "256",
             "--heads", "2"])
        check(open(w("x.bin"), "rb").read() == open(w("m1.bin"), "rb").read(), "export with flags = with the file")

    if a.matrix:
        mpi = shlex.split(a.mpirun)
        # ranks given different settings end with one error naming them, never a hang
        one = z + ["--config", w("c0.json"), "--text", w("t.txt"), "--layers", "1", "--width", "16", "--heads", "2",
                   "--context", "8"]
        p = subprocess.run(mpi + ["-np", "1"] + one + ["--steps", "2", ":", "-np", "1"] + one + ["--steps", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        check(p.returncode != 0 and "--steps is 2 on rank 0 but 3 on rank 1" in p.stdout,
              f"mismatched --steps: exit {p.returncode}: {p.stdout.strip()[-400:]}")
        shape = ["--layers", "2", "--width", "16", "--heads", "2", "--context", "8", "--vocab", "128"]
        ref = {}
        tol = {"fp32": 1e-6, "bf16": 1e-3, "fp16": 1e-4}
        for dtype in ["fp32", "bf16", "fp16"]:
            for stage in [0, 1, 2, 3]:
                config(w(f"c{stage}{dtype}.json"), stage, dtype)
                for ranks in [1, 2, 3]:
                    rep = w(f"r_{dtype}_{stage}_{ranks}.json")
                    cmd = (mpi + ["-np", str(ranks)] if ranks > 1 else []) + z + [
                        "--config", w(f"c{stage}{dtype}.json"), "--steps", "20", "--data", w("tok.bin"),
                        "--report", rep, "--seed", "7"] + shape
                    run(cmd)
                    try:
                        losses = json.load(open(rep))["losses"]
                    except (OSError, ValueError):
                        check(False, f"no report from {dtype} stage {stage} ranks {ranks}")
                        continue
                    check(len(losses) == 20, f"{dtype} stage {stage} x{ranks}: {len(losses)} losses")
                    if stage == 0 and ranks == 1:
                        ref[dtype] = losses
                        check(losses[-1] < losses[0] - 0.5, f"{dtype}: loss falls {losses[0]} -> {losses[-1]}")
                        continue
                    worst = max(abs(x - y) / abs(y) for x, y in zip(losses, ref[dtype]))
                    print(f"{dtype} stage {stage} ranks {ranks}: max relative loss difference {worst:.2e}", flush=True)
                    check(worst <= tol[dtype], f"{dtype} stage {stage} x{ranks}: {worst:.3e} > {tol[dtype]}")

        # optimizer offload (CPU memory, NVMe files) at 2 ranks, against the fp32 reference
        for name, stage, off in (("cpu", 2, {"device": "cpu"}),
                                 ("nvme", 3, {"device": "nvme", "nvme_path": w("nvme"), "buffer_count": 4})):
            config(w(f"coff_{name}.json"), stage, "fp32", offload=off)
            rep = w(f"r_off_{name}.json")
            run(mpi + ["-np", "2"] + z + ["--config", w(f"coff_{name}.json"), "--steps", "20", "--data", w("tok.bin"),
                                          "--report", rep, "--seed", "7"] + shape)
            try:
                losses = json.load(open(rep))["losses"]
                worst = max(abs(x - y) / abs(y) for x, y in zip(losses, ref["fp32"]))
                print(f"fp32 stage {stage} offload {name} ranks 2: max relative loss difference {worst:.2e}", flush=True)
                check(len(losses) == 20 and worst <= tol["fp32"], f"offload {name}: {worst:.3e}")
            except (OSError, ValueError):
                check(False, f"no report from offload {name}")

        # --shuffle: the same seeded batch order on 1 and 2 ranks, not the file order
        sh = {}
        for ranks, stage in ((1, 0), (2, 2)):
            rep = w(f"r_shuffle_{ranks}.json")
            run((mpi + ["-np", "2"] if ranks > 1 else []) + z + [
                "--config", w(f"c{stage}fp32.json"), "--steps", "20", "--data", w("tok.bin"), "--report", rep,
                "--seed", "7", "--shuffle"] + shape)
            try:
                sh[ranks] = json.load(open(rep))["losses"]
            except (OSError, ValueError):
                sh[ranks] = None
        if check(sh[1] and sh[2], "shuffled runs report"):
            worst = max(abs(x - y) / abs(y) for x, y in zip(sh[2], sh[1]))
            check(worst <= tol["fp32"], f"--shuffle at 2 ranks vs 1: {worst:.3e}")
            check(sh[1][1:] != ref["fp32"][1:], "--shuffle changes the batches")

        # fp32 bit for bit the same whatever --threads and the rank count (micro batch half the batch, so 1 rank
        # accumulates two micro-steps as 2 ranks add theirs); a shape of several attention blocks and pieces
        config(w("cbits.json"), 2, "fp32", micro=3, batch=6)
        bits = {}
        for ranks, threads in ((1, 1), (1, 2), (1, 3), (2, 1)):
            rep = w(f"r_bits_{ranks}x{threads}.json")
            run((mpi + ["-np", str(ranks)] if ranks > 1 else []) + z + [
                "--config", w("cbits.json"), "--steps", "4", "--data", w("tok.bin"), "--report", rep, "--seed", "7",
                "--threads", str(threads), "--layers", "2", "--width", "96", "--heads", "3", "--context", "80",
                "--vocab", "128"])
            try:
                r = json.load(open(rep))
                bits[(ranks, threads)] = (r["losses"], r["param_checksum"])
            except (OSError, ValueError):
                check(False, f"no report from {ranks} ranks x {threads} threads")
        for k, v in bits.items():
            check(v == bits.get((1, 1)), f"fp32 {k[0]} ranks x {k[1]} threads: losses/params {v} differ from 1 x 1's "
                  f"{bits.get((1, 1))}")

    if a.text:
        rep = w("text.json")
        config(w("ct.json"), 2, "fp32", micro=4, batch=4)
        run(z + ["--config", w("ct.json"), "--steps", "60", "--text", a.text, "--layers", "2", "--width", "32",
                 "--heads", "2", "--context", "32", "--val-every", "30", "--sample-tokens", "40", "--report", rep])
        r = json.load(open(rep))
        l = r["losses"]
        check(len(l) == 60, "one loss per step")
        check(abs(l[0] - math.log(256)) < 0.3, f"first loss {l[0]} near ln 256")
        check(l[-1] < l[0] - 1.0, f"loss falls on real text: {l[0]} -> {l[-1]}")
        check(len(r["val_losses"]) == 2 and r["final_val_loss"] < l[0] - 1.0, f"validation {r['val_losses']}")
        check(r["tokens_per_s"] > 0 and len(r.get("sample", "")) >= 40, "tokens/s and a sample")
        check(r["shape"]["layers"] == 2 and r["shape"]["vocab"] == 256, "shape in the report")

    print("gpt2_cli:", "FAILED %d" % checks.failures if checks.failures else "passed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
