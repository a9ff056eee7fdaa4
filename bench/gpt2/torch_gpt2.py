#!/usr/bin/env python3
"""The PyTorch reference for bench/gpt2/vs_torch.sh: GPT-2 as nanoGPT writes it (pre-LN blocks, causal
attention through scaled_dot_product_attention, GELU tanh MLP 4x, final LayerNorm, output projection tied
to the token embedding, no dropout, LayerNorm eps 1e-5), trained with AdamW on the windows of an llm.c token
file in zinc's order (window k = tokens k*T .. k*T+T), on the CPU. Prints one JSON line: tokens/s over the
steps after the first (warm-up: lazy optimizer state), the losses, the peak RSS. A benchmark peer only,
never part of zinc."""
import argparse
import json
import math
import resource
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V, T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    for k in ("layers", "width", "heads", "vocab", "context", "batch", "steps", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tok = np.fromfile(a.data, dtype=np.uint16, offset=256 * 4).astype(np.int64)
    T, B = a.context, a.batch
    per_pass = (len(tok) - 1) // (B * T)
    model = GPT(a.layers, a.width, a.heads, a.vocab, T)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8, fused=True)
    losses, t0 = [], None
    for step in range(a.steps):
        if step == 1:
            t0 = time.perf_counter()
        k0 = (step % per_pass) * B
        w = np.stack([tok[(k0 + b) * T:(k0 + b) * T + T + 1] for b in range(B)])
        x, y = torch.from_numpy(w[:, :-1]), torch.from_numpy(w[:, 1:])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    dt = time.perf_counter() - t0
    print(json.dumps({"tokens_per_s": (a.steps - 1) * B * T / dt, "losses": losses,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}))


if __name__ == "__main__":
    main()
