"""PyTorch CPU AdamW timed the way bench_adam_cpu times zinc: one flat fp32 tensor of N parameters (param,
grad, exp_avg, exp_avg_sq: 28 bytes/param moved per step), lr 1e-3, weight_decay 0.1, at each requested
thread count, fused and foreach implementations, median of K steps after warm-up.

usage: python3 torch_cpu_adam.py [--cpu-n 1e8] [--threads 1,2,0] [--reps 10] [--warmup 2]
(threads 0 means torch's default, all cores). Same output format as /work/shared/peers/torch_adam.py.
"""
import argparse, time, torch

p = argparse.ArgumentParser()
p.add_argument("--cpu-n", type=float, default=1e8)
p.add_argument("--threads", default="1,2,0")
p.add_argument("--reps", type=int, default=10)
p.add_argument("--warmup", type=int, default=2)
a = p.parse_args()

default_threads = torch.get_num_threads()
n = int(a.cpu_n)
print(f"torch {torch.__version__}, n={n}, default threads {default_threads}, "
      f"median of {a.reps} after {a.warmup} warm-up", flush=True)
for t in [int(x) for x in a.threads.split(",")]:
    torch.set_num_threads(t if t > 0 else default_threads)
    for fused in (True, False):
        q = torch.randn(n, requires_grad=True)
        q.grad = torch.randn(n)
        opt = torch.optim.AdamW([q], lr=1e-3, weight_decay=0.1, fused=fused, foreach=None if fused else True)
        for _ in range(a.warmup):
            opt.step()
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            opt.step()
            ts.append((time.perf_counter() - t0) * 1e3)
        ts.sort()
        ms = ts[len(ts) // 2] if len(ts) % 2 else 0.5 * (ts[len(ts) // 2 - 1] + ts[len(ts) // 2])
        label = f"cpu {torch.get_num_threads()} threads torch AdamW {'fused' if fused else 'foreach'}"
        print(f"{n/1e6:9.1f}M  {label:40s} {ms:9.3f} ms  {n*28/ms/1e6:7.1f} GB/s  (min {ts[0]:.3f} ms)", flush=True)
        del opt, q
