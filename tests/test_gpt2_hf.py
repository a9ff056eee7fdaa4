#!/usr/bin/env python3
"""Hugging Face GPT-2 interop of zinc train --init and zinc checkpoint export --format hf (standard library
only; the transformers side is tests/test_gpt2_hf_transformers.py).

  roundtrip: an HF GPT-2 written here (GPT2LMHeadModel's names with "transformer.", Conv1D (in, out) matrices,
             wte [V, C] with V = 500 that zinc pads to 512, a tied lm_head.weight in the file, config.json) is
             --init'ed, trained 0 steps with --save and exported with --format hf: every tensor comes back byte
             for byte (F32), at 1 rank stage 0 and at 2 ranks stage 3 (each rank builds from its own shard's
             byte ranges); the export re-imported and exported again is the same bytes; a file without the
             "transformer." prefix, without lm_head.weight and without config.json (--heads given) reads the
             same; a BF16 file exported with --dtype bf16 and an F16 one with --dtype fp16 come back byte for
             byte; config.json has GPT2Config's fields; the same model sharded over three files by a
             model.safetensors.index.json (save_pretrained's layout beyond max_shard_size), given as the
             directory or as the index, at 1 rank and at 2 ranks stage 3, comes back byte for byte;
  errors:    a truncated file, a bad header length, a header that is not JSON, a missing tensor, a tensor of
             the wrong shape, an unknown tensor, an F64 tensor, a shape flag that disagrees, no head count, a
             config.json of another activation, LayerNorm eps or an untied head; an index that names a missing
             shard, a shard with a directory, a tensor its shard lacks, a shard's tensor it does not list or
             lists elsewhere, no weight_map, a directory with neither file: each exits 1 naming the file, the
             tensor and the shapes or the flag.
Exit 0 pass, 1 fail.
"""
import argparse
import array
import json
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys

import checks
from checks import check

L, C, H, V, T = 2, 48, 4, 500, 64  # C = 48: the 2-rank stage-3 shard boundary falls mid-row in h0.mlp.c_fc
KINDS = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
         "mlp.c_proj.bias"]


def hf_shapes(prefix="transformer."):
    s = {prefix + "wte.weight": [V, C], prefix + "wpe.weight": [T, C]}
    dims = [[C], [C], [C, 3 * C], [3 * C], [C, C], [C], [C], [C], [C, 4 * C], [4 * C], [4 * C, C], [C]]
    for l in range(L):
        for k, d in zip(KINDS, dims):
            s["%sh.%d.%s" % (prefix, l, k)] = d
    s[prefix + "ln_f.weight"] = [C]
    s[prefix + "ln_f.bias"] = [C]
    return s


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def f32_bytes(n, rnd):
    return array.array("f", [rnd.gauss(0, 0.05) for _ in range(n)]).tobytes()


def bf16_bytes(n, rnd):
    raw = f32_bytes(n, rnd)
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))  # truncated: any bf16 is fine


def write_st(path, tensors, header_edit=None):
    """tensors: name -> (dtype, shape, bytes)."""
    h, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (dt, shape, b) in tensors.items():
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    if header_edit:
        header_edit(h)
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_sharded(d, tensors, nshards=3, edit=None):
    """save_pretrained's sharded layout: model-0000k-of-0000n.safetensors and the index (edit(index, shards))."""
    names = list(tensors)
    shards = {}
    for i, name in enumerate(names):
        shards.setdefault("model-%05d-of-%05d.safetensors" % (i * nshards // len(names) + 1, nshards), {})[name] = \
            tensors[name]
    index = {"metadata": {"total_size": sum(len(b) for _, _, b in tensors.values())},
             "weight_map": {n: f for f, ts in shards.items() for n in ts}}
    if edit:
        edit(index, shards)
    for f, ts in shards.items():
        write_st(os.path.join(d, f), ts)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)


def f16_bytes(n, rnd):
    return struct.pack("<%de" % n, *[rnd.gauss(0, 0.05) for _ in range(n)])


def make_model(seed=1, dtype="F32", prefix="transformer.", head=True):
    rnd = random.Random(seed)
    t = {}
    make = {"F32": f32_bytes, "BF16": bf16_bytes, "F16": f16_bytes}[dtype]
    for name, shape in hf_shapes(prefix).items():
        t[name] = (dtype, shape, make(numel(shape), rnd))
    if head:
        t["lm_head.weight"] = t[prefix + "wte.weight"]
    return t


def write_config(d, **over):
    c = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T, "n_embd": C,
         "n_layer": L, "n_head": H, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    c.update(over)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)


def read_st(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    h = json.loads(data[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect:
        print("command:", " ".join(cmd))
        print(p.stdout[-3000:])
    check(p.returncode == expect, f"exit {p.returncode}, expected {expect}: {' '.join(cmd[-12:])}")
    return p.stdout


def same_tensors(want, got_path, what, prefix="transformer."):
    got = read_st(got_path)
    names = sorted(k for k in want if k != "lm_head.weight")
    check(sorted(got) == sorted(("transformer." + k[len(prefix):]) for k in names),
          f"{what}: tensor names {sorted(got)[:4]}... differ")
    bad = [k for k in names if got.get("transformer." + k[len(prefix):]) != want[k]]
    check(not bad, f"{what}: {len(bad)} tensors differ in dtype, shape or bytes, first {bad[:3]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda *n: os.path.join(a.workdir, *n)
    cfg = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 0}}
    json.dump(cfg, open(w("c0.json"), "w"))
    cfg["zero_optimization"]["stage"] = 3
    json.dump(cfg, open(w("c3.json"), "w"))
    rnd = random.Random(7)
    toks = [rnd.randrange(V) for _ in range(4 * T * 3 + 1)]
    with open(w("tok.bin"), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
    train = [a.zinc, "train", "--model", "gpt2", "--quiet", "--steps", "0", "--data", w("tok.bin")]
    export = [a.zinc, "checkpoint", "export", "--format", "hf"]

    # ---- roundtrip, 1 rank stage 0 and 2 ranks stage 3
    os.makedirs(w("hf"))
    model = make_model()
    write_st(w("hf", "model.safetensors"), model)
    write_config(w("hf"))
    run(train + ["--config", w("c0.json"), "--init", w("hf"), "--save", w("ck1")])
    run(export + [w("ck1"), "--out", w("out1")])
    same_tensors(model, w("out1", "model.safetensors"), "1 rank, HF -> zinc -> HF")
    c = json.load(open(w("out1", "config.json")))
    for k, v in {"n_embd": C, "n_layer": L, "n_head": H, "n_positions": T, "vocab_size": V,
                 "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
                 "tie_word_embeddings": True}.items():
        check(c.get(k) == v, f"config.json {k} = {c.get(k)!r}, expected {v!r}")
    check(abs(c.get("layer_norm_epsilon", 0) - 1e-5) < 1e-12, "config.json layer_norm_epsilon 1e-5")
    if a.mpirun:
        run(shlex.split(a.mpirun) + ["-np", "2"] + train + ["--config", w("c3.json"), "--init",
                                                             w("hf", "model.safetensors"), "--save", w("ck2")])
        run(export + [w("ck2"), "--out", w("out2")])
        same_tensors(model, w("out2", "model.safetensors"), "2 ranks stage 3, HF -> zinc -> HF")
    # zinc's own export read back: HF -> zinc -> HF -> zinc -> HF
    run(train + ["--config", w("c0.json"), "--init", w("out1"), "--save", w("ck3")])
    run(export + [w("ck3"), "--out", w("out3")])
    same_tensors(model, w("out3", "model.safetensors"), "HF -> zinc -> HF -> zinc -> HF")
    # no prefix, no lm_head.weight, no config.json: --heads gives the head count
    bare = make_model(prefix="", head=False)
    write_st(w("bare.safetensors"), bare)
    out = run(train + ["--config", w("c0.json"), "--init", w("bare.safetensors")], expect=1)
    check("give --heads H" in out, f"no head count: {out.strip()[-300:]}")
    run(train + ["--config", w("c0.json"), "--init", w("bare.safetensors"), "--heads", str(H), "--save", w("ck4")])
    run(export + [w("ck4"), "--out", w("out4")])
    same_tensors(bare, w("out4", "model.safetensors"), "no prefix, no head", prefix="")
    # BF16 in the file, exported as bf16
    os.makedirs(w("hfb"))
    mb = make_model(dtype="BF16")
    write_st(w("hfb", "model.safetensors"), mb)
    write_config(w("hfb"))
    run(train + ["--config", w("c0.json"), "--init", w("hfb"), "--save", w("ck5")])
    run(export + [w("ck5"), "--out", w("out5"), "--dtype", "bf16"])
    same_tensors(mb, w("out5", "model.safetensors"), "BF16 -> zinc (fp32 master) -> BF16")
    # F16 in a .safetensors file with config.json beside it, exported as fp16
    os.makedirs(w("hfh"))
    mh = make_model(dtype="F16")
    write_st(w("hfh", "weights.safetensors"), mh)
    write_config(w("hfh"))
    run(train + ["--config", w("c0.json"), "--init", w("hfh", "weights.safetensors"), "--save", w("ck6")])
    run(export + [w("ck6"), "--out", w("out6"), "--dtype", "fp16"])
    same_tensors(mh, w("out6", "model.safetensors"), "F16 -> zinc (fp32 master) -> F16")
    out = run(export + [w("ck5"), "--out", w("out5"), "--dtype", "bf16"], expect=1)
    check("exists" in out, f"an existing export without --force: {out.strip()[-300:]}")
    run(export + [w("ck5"), "--out", w("out5"), "--dtype", "bf16", "--force"])

    # sharded by an index: the directory, and the index itself; 2 ranks stage 3 read their ranges of each shard
    os.makedirs(w("hfs"))
    write_sharded(w("hfs"), model)
    write_config(w("hfs"))
    run(train + ["--config", w("c0.json"), "--init", w("hfs"), "--save", w("ck7")])
    run(export + [w("ck7"), "--out", w("out7")])
    same_tensors(model, w("out7", "model.safetensors"), "sharded (3 files and an index) -> zinc -> HF")
    if a.mpirun:
        run(shlex.split(a.mpirun) + ["-np", "2"] + train + ["--config", w("c3.json"), "--init",
                                                             w("hfs", "model.safetensors.index.json"),
                                                             "--save", w("ck8")])
        run(export + [w("ck8"), "--out", w("out8")])
        same_tensors(model, w("out8", "model.safetensors"), "sharded, 2 ranks stage 3, the index given")

    # ---- errors
    base = train + ["--config", w("c0.json"), "--init"]

    def bad_index(name, edit, needles):
        d = w("badidx_" + name)
        os.makedirs(d)
        write_sharded(d, model, edit=edit)
        write_config(d)
        out = run(base + [d], expect=1)
        for n in needles:
            check(n in out, f"index {name}: message lacks {n!r}: {out.strip()[-400:]}")

    first = "model-00001-of-00003.safetensors"
    bad_index("noshard", lambda i, s: i["weight_map"].update({"transformer.ln_f.bias": "model-9.safetensors"}),
              ["model-9.safetensors"])
    bad_index("dir", lambda i, s: i["weight_map"].update({"transformer.ln_f.bias": "../x.safetensors"}),
              ["weight_map[\"transformer.ln_f.bias\"] is \"../x.safetensors\"", "without a directory"])
    bad_index("lacks", lambda i, s: i["weight_map"].update({"transformer.ln_f.bias": first}),
              ["puts tensor transformer.ln_f.bias in", first, "which has no such tensor"])
    bad_index("unlisted", lambda i, s: i["weight_map"].pop("transformer.wpe.weight"),
              ["holds tensor transformer.wpe.weight, which", "does not list"])
    bad_index("nomap", lambda i, s: i.pop("weight_map"), ["no \"weight_map\" object"])
    os.makedirs(w("bad_empty"))
    out = run(base + [w("bad_empty")], expect=1)
    check("neither model.safetensors nor model.safetensors.index.json" in out, f"empty directory: {out[-400:]}")

    def bad(name, tensors, needles, edit=None, config=True, extra=()):
        d = w("bad_" + name)
        os.makedirs(d)
        write_st(os.path.join(d, "model.safetensors"), tensors, edit)
        if config:
            write_config(d, **(config if isinstance(config, dict) else {}))
        out = run(base + [d] + list(extra), expect=1)
        for n in needles:
            check(n in out, f"{name}: message lacks {n!r}: {out.strip()[-400:]}")
        return d

    full = open(w("hf", "model.safetensors"), "rb").read()
    os.makedirs(w("bad_trunc"))
    open(w("bad_trunc", "model.safetensors"), "wb").write(full[:-100])
    write_config(w("bad_trunc"))
    out = run(base + [w("bad_trunc")], expect=1)
    check("lie outside" in out and "truncated" in out and "model.safetensors" in out, f"truncated: {out[-400:]}")
    os.makedirs(w("bad_len"))
    open(w("bad_len", "model.safetensors"), "wb").write(struct.pack("<Q", 1 << 40) + full[8:])
    out = run(base + [w("bad_len")], expect=1)
    check("header length 1099511627776" in out, f"bad header length: {out[-400:]}")
    os.makedirs(w("bad_json"))
    open(w("bad_json", "model.safetensors"), "wb").write(full[:8] + b"{oops" + full[13:])
    out = run(base + [w("bad_json")], expect=1)
    check("not a JSON object" in out, f"bad header: {out[-400:]}")
    m = dict(model)
    del m["transformer.h.1.mlp.c_fc.bias"]
    bad("missing", m, ["has no tensor transformer.h.1.mlp.c_fc.bias"])
    m = dict(model)
    m["transformer.h.0.mlp.c_fc.weight"] = ("F32", [C, 200], f32_bytes(C * 200, random.Random(3)))
    bad("shape", m, ["tensor transformer.h.0.mlp.c_fc.weight has shape [48, 200], expected [48, 192]", "width 48"])
    m = dict(model)
    m["transformer.h.0.attn.extra"] = ("F32", [4], f32_bytes(4, random.Random(3)))
    bad("unknown", m, ["tensor transformer.h.0.attn.extra is not one of a GPT-2's"])
    m = dict(model)
    m["transformer.ln_f.bias"] = ("F64", [C], b"\0" * 8 * C)
    bad("f64", m, ["tensor transformer.ln_f.bias has dtype F64"])
    bad("width", model, ["--width 128 disagrees", "transformer.wte.weight's columns", "give 48"], extra=["--width", "128"])
    bad("layers", model, ["--layers 3 disagrees", "give 2"], extra=["--layers", "3"])
    bad("act", model, ["activation_function \"gelu\""], config={"activation_function": "gelu"})
    bad("eps", model, ["layer_norm_epsilon 1e-06"], config={"layer_norm_epsilon": 1e-6})
    bad("untied", model, ["tie_word_embeddings false"], config={"tie_word_embeddings": False})
    bad("nlayer", model, ["n_layer 3 disagrees with the weights"], config={"n_layer": 3})
    print("test_gpt2_hf: %s" % ("FAILED (%d)" % checks.failures if checks.failures else "ok"))
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
