#!/usr/bin/env python3
"""Reads the dumps of bench/patches/qgz_probe.diff (ZPROBE_DUMP=DIR, 4 ranks, one gradient bucket a step: the
whole model) and prints, per quantized tensor, the qgZ result's error against the exact sum of the ranks'
gradients in float64: ||q - x|| / ||x||, the share of nonzero elements that came out zero, and the mean
correlation of the error between consecutive steps (0: independent noise; near 1: the same bias every step).

    bench/patches/qgz_probe_errors.py DIR [TOTAL]      TOTAL: the flat gradient's padded length (the dumps' hi)
"""
import collections, glob, os, re, sys
import numpy as np

d = sys.argv[1]
files = collections.defaultdict(dict)
for f in glob.glob(os.path.join(d, "*.bin")):
    m = re.match(r"(src|tot)_r(\d+)_s(\d+)_c\d+_(\d+)_(\d+)_4\.bin", os.path.basename(f))
    if m:
        files[int(m.group(3))][(m.group(1), int(m.group(2)))] = (int(m.group(4)), int(m.group(5)),
                                                                  np.fromfile(f, dtype=np.float32))
ranks = sorted({r for s in files.values() for t, r in s if t == "src"})
total = int(sys.argv[2]) if len(sys.argv) > 2 else max(v[1] for s in files.values() for v in s.values())
lay = [tuple(map(int, line.split())) for line in open(os.path.join(d, "layout_r0.txt"))]
segs = [(b, lay[i + 1][0] if i + 1 < len(lay) else total, g) for i, (b, g) in enumerate(lay)]
steps = sorted(files)
res = {}
for s in steps:
    x = sum(files[s][("src", r)][2].astype(np.float64) for r in ranks)
    q = np.zeros(total)
    for r in ranks:
        lo, hi, v = files[s][("tot", r)]
        q[lo:hi] = v
    res[s] = (x[:total], q)
pick = sorted({steps[0], steps[len(steps) // 2], steps[-1]})
print("tensor (flat start, elements, group): per step", pick, "relative error / share zeroed; error correlation")
for b, e, g in segs:
    if not g:
        continue
    cols = []
    for s in pick:
        x, q = res[s][0][b:e], res[s][1][b:e]
        nz = x != 0
        cols.append(f"{np.linalg.norm(q - x) / max(np.linalg.norm(x), 1e-30):.3f}/{np.mean(q[nz] == 0):.2f}")
    cor = [np.dot(e0, e1) / (np.linalg.norm(e0) * np.linalg.norm(e1) or 1) for e0, e1 in
           ((res[a][1][b:e] - res[a][0][b:e], res[c][1][b:e] - res[c][0][b:e]) for a, c in zip(steps, steps[1:]))]
    print(f"{b:8d} {e - b:7d} {g:5d}  " + "  ".join(cols) + f"  {np.mean(cor):+.2f}")
print("whole gradient, relative error per step:",
      " ".join(f"{np.linalg.norm(res[s][1] - res[s][0]) / np.linalg.norm(res[s][0]):.3f}" for s in steps))
