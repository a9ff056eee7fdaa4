#!/usr/bin/env python3
"""zinc's GPT-2 against transformers' GPT2LMHeadModel (run with the Python of the DeepSpeed venv, which has torch
and transformers: scripts/ds-venv.sh; exit 77, the reason printed, when it cannot import them).

A GPT2LMHeadModel with random weights (a small GPT2Config, built here: no download; every weight, bias and
LayerNorm parameter perturbed so none is at its initial 0 or 1) is saved with save_pretrained(safe_serialization
=True) and read by zinc train --init DIR. zinc prints no logits, so the comparison is on losses over the same
windows (gpt2_window's: window k of a batch is tokens [k T, k T + T]), which is the mean of log-softmax of the
logits at the targets:
  - import: one step at lr 0 (the weights stay as imported): zinc's step-1 training loss (its forward before the
    update) and its validation loss equal transformers' on the same windows within 1e-5 relative;
  - sharded: the same model saved with max_shard_size="100KB" (save_pretrained writes shards and
    model.safetensors.index.json) imports to the same losses, bit for bit, as the one-file save;
  - export of the untrained model: from_pretrained(zinc's --format hf export) gives logits equal to the original
    model's (max |diff| 0: the same weights), and the file's tensors equal the original's byte for byte;
  - a zinc-trained model: 3 steps at lr 1e-3, exported; transformers' loss on the validation windows equals
    zinc's final validation loss within 1e-5 relative; also at 2 ranks, ZeRO stage 3 when --mpirun is given.
Exit 0 pass, 1 fail, 77 skipped.
"""
import argparse
import json
import os
import shlex
import shutil
import struct
import subprocess

import checks
from checks import check
import sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file
except Exception as ex:  # noqa: BLE001
    print("SKIP: torch, transformers and safetensors are needed (scripts/ds-venv.sh installs them):", ex)
    sys.exit(77)

V, T, C, L, H, B = 500, 64, 64, 2, 4, 4


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("command:", " ".join(cmd))
        print(p.stdout[-3000:])
    check(p.returncode == 0, f"exit {p.returncode}: {' '.join(cmd[-12:])}")
    return p.returncode == 0


def write_tokens(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def hf_loss(model, toks):
    """Mean cross entropy over the B windows of the first global batch (zinc's gpt2_window)."""
    x = torch.tensor([toks[k * T:k * T + T + 1] for k in range(B)], dtype=torch.long)
    with torch.no_grad():
        logits = model(x[:, :-1]).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1)).item()


def rel(a, b):
    return abs(a - b) / abs(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda *n: os.path.join(a.workdir, *n)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                                  activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  bos_token_id=V - 1, eos_token_id=V - 1)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(w("hf"), safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    train = torch.randint(0, V, (B * T * 4 + 1,), generator=g).tolist()
    val = torch.randint(0, V, (B * T * 2 + 1,), generator=g).tolist()
    write_tokens(w("train.bin"), train)
    write_tokens(w("val.bin"), val)

    def conf(path, stage, lr):
        json.dump({"train_batch_size": B, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
                   "optimizer": {"type": "AdamW", "params": {"lr": lr, "weight_decay": 0.0}},
                   "zero_optimization": {"stage": stage}}, open(path, "w"))

    conf(w("lr0.json"), 0, 0.0)
    conf(w("lr3.json"), 0, 1e-3)
    conf(w("lr3s3.json"), 3, 1e-3)
    z = [a.zinc, "train", "--model", "gpt2", "--quiet", "--data", w("train.bin"), "--val-data", w("val.bin"),
         "--val-batches", "1", "--gemm", "openblas"]

    # import: zinc's forward of the HF weights
    if run(z + ["--config", w("lr0.json"), "--init", w("hf"), "--steps", "1", "--save", w("ck0"),
                "--report", w("r0.json")]):
        r = json.load(open(w("r0.json")))
        want_train, want_val = hf_loss(model, train), hf_loss(model, val)
        print(f"import: zinc train loss {r['losses'][0]:.9f}, transformers {want_train:.9f} "
              f"(rel {rel(r['losses'][0], want_train):.2e}); val {r['final_val_loss']:.9f} vs {want_val:.9f} "
              f"(rel {rel(r['final_val_loss'], want_val):.2e})")
        check(rel(r["losses"][0], want_train) < 1e-5, "zinc's training loss of the imported model vs transformers'")
        check(rel(r["final_val_loss"], want_val) < 1e-5, "zinc's validation loss of the imported model vs transformers'")
    # save_pretrained's shards and index: the same forward as the one-file save
    model.save_pretrained(w("hfs"), safe_serialization=True, max_shard_size="100KB")
    nshards = len([f for f in os.listdir(w("hfs")) if f.endswith(".safetensors")])
    check(nshards > 1 and os.path.exists(w("hfs", "model.safetensors.index.json")),
          f"save_pretrained(max_shard_size=100KB) wrote {nshards} shard(s) and no index: the sharded case is not tested")
    if run(z + ["--config", w("lr0.json"), "--init", w("hfs"), "--steps", "1", "--report", w("rs.json")]):
        rs, r = json.load(open(w("rs.json"))), json.load(open(w("r0.json")))
        print(f"sharded ({nshards} files): zinc train loss {rs['losses'][0]:.9f}, one file {r['losses'][0]:.9f}")
        check(rs["losses"][0] == r["losses"][0] and rs["final_val_loss"] == r["final_val_loss"],
              "the sharded save's losses differ from the one-file save's")
    # export of the untrained model: the same weights, the same logits
    if run([a.zinc, "checkpoint", "export", "--format", "hf", w("ck0"), "--out", w("out0")]):
        back = transformers.GPT2LMHeadModel.from_pretrained(w("out0")).eval()
        x = torch.tensor([val[:T]])
        with torch.no_grad():
            d = (back(x).logits - model(x).logits).abs().max().item()
        print(f"export of the imported model: max |logits - transformers'| = {d:.3g}")
        check(d == 0.0, f"from_pretrained(zinc's export) logits differ from the original's by {d}")
        orig, got = load_file(w("hf", "model.safetensors")), load_file(w("out0", "model.safetensors"))
        for k, v in orig.items():
            if k == "lm_head.weight":
                continue
            check(k in got and got[k].dtype == v.dtype and torch.equal(got[k], v), f"exported tensor {k} differs")
    # a zinc-trained model in transformers
    runs = [("1 rank", [], "lr3.json", "ck3", "out3")]
    if a.mpirun:
        runs.append(("2 ranks stage 3", shlex.split(a.mpirun) + ["-np", "2"], "lr3s3.json", "ck3s3", "out3s3"))
    for what, pre, c, ck, out in runs:
        rep = w(ck + ".json")
        if not run(pre + z + ["--config", w(c), "--init", w("hf"), "--steps", "3", "--save", w(ck), "--report", rep]):
            continue
        if not run([a.zinc, "checkpoint", "export", "--format", "hf", w(ck), "--out", w(out)]):
            continue
        zl = json.load(open(rep))["final_val_loss"]
        hl = hf_loss(transformers.GPT2LMHeadModel.from_pretrained(w(out)).eval(), val)
        print(f"trained ({what}): zinc val loss {zl:.9f}, transformers on zinc's export {hl:.9f} (rel {rel(zl, hl):.2e})")
        check(rel(zl, hl) < 1e-5, f"{what}: transformers' loss of zinc's trained model vs zinc's")
    print("gpt2_hf_transformers:", "FAILED %d" % checks.failures if checks.failures else "passed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
