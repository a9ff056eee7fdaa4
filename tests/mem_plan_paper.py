#!/usr/bin/env python3
"""`zinc mem plan --paper` against the ZeRO paper (Rajbhandari et al. 2020), Table 1: memory per GPU for a
7.5B-parameter model with K = 12, computed here from the paper's formulas (Figure 1: baseline (2+2+K)Psi,
P_os 2Psi + 2Psi + K Psi/Nd, P_os+g 2Psi + (2+K)Psi/Nd, P_os+g+p (2+2+K)Psi/Nd) and checked cell by cell,
in GB (1e9, the paper's unit, default with --paper) and in GiB (--units GiB); the printed Table 1 values
(rounded in the paper) are checked to their printed precision. Also: the plan's GPU counts for a 32 GB GPU
and the headroom, and the refusal of a bad --units.

    mem_plan_paper.py ZINC_BINARY
"""
import json
import math
import os
import subprocess
import sys

zinc = sys.argv[1]
PSI, K = 7.5e9, 12
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def formula(stage, nd):
    return [(2 + 2 + K) * PSI, 2 * PSI + 2 * PSI + K * PSI / nd, 2 * PSI + (2 + K) * PSI / nd,
            (2 + 2 + K) * PSI / nd][stage]


def plan(*extra, env=None):
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run([zinc, "mem", "plan", "--paper", "--params", "7500000000", "--json"] + list(extra),
                         capture_output=True, text=True, env=e)
    if out.returncode != 0:
        print(out.stderr)
    return out


# The paper's Table 1, as printed (GB), for Nd = 1, 4, 16, 64, 256, 1024.
TABLE1 = {1: [120, 120, 120, 120], 4: [120, 52.5, 41.3, 30], 16: [120, 35.6, 21.6, 7.5],
          64: [120, 31.4, 16.6, 1.88], 256: [120, 30.4, 15.4, 0.47], 1024: [120, 30.1, 15.1, 0.12]}

for units, scale in (("GB", 1e9), ("GiB", 2.0 ** 30)):
    r = plan("--gpu-mem", "32GB", "--units", units) if units == "GiB" else plan("--gpu-mem", "32GB")
    check(r.returncode == 0, "plan --paper (%s) exit %d" % (units, r.returncode))
    j = json.loads(r.stdout)
    check(j["units"] == units, "units %s" % j["units"])
    rows = {row["gpus"]: row for row in j["per_gpu"]}
    for nd in TABLE1:
        for s in range(4):
            want = formula(s, nd) / scale
            got = rows[nd]["stage%d" % s]
            check(abs(got - want) <= 1e-9 * want, "Nd=%d stage %d: %r %s, formula %r" % (nd, s, got, units, want))
            if units == "GB":
                printed = TABLE1[nd][s]
                digits = len(str(printed).split(".")[1]) if "." in str(printed) else 0
                check(round(got, digits) == printed or abs(got - printed) <= 0.5 * 10 ** -digits + 1e-12,
                      "Nd=%d stage %d: %r GB against Table 1's %r" % (nd, s, got, printed))

# The fewest GPUs for a 32 GB GPU with 10% headroom (29.09 GB usable): stage 3 needs 120/29.09 -> 5,
# stage 2 needs 15 + 105/N <= 29.09 -> N = 8; stages 0 and 1 never fit (30 GB > 29.09 as N grows).
j = json.loads(plan("--gpu-mem", "32GB").stdout)
got = {row["stage"]: row.get("gpus") for row in j["plan"]}
usable = 32e9 / 1.1
want = {}
for s in range(4):
    want[s] = next((n for n in range(1, 1025) if formula(s, n) <= usable), None)
check(got == want, "fewest GPUs %r, formula %r" % (got, want))
j = json.loads(plan("--gpu-mem", "32GB", env={"ZINC_MEM_HEADROOM": "0"}).stdout)
got0 = {row["stage"]: row.get("gpus") for row in j["plan"]}
want0 = {s: next((n for n in range(1, 1025) if formula(s, n) <= 32e9), None) for s in range(4)}
check(got0 == want0 and got0[3] == 4, "no headroom: %r, formula %r" % (got0, want0))
bad = plan("--gpu-mem", "32GB", "--units", "MB")
check(bad.returncode == 2 and "--units must be GB" in bad.stderr, "bad --units refused: %r" % bad.stderr)
bad = plan("--gpu-mem", "lots")
check(bad.returncode == 2 and "--gpu-mem needs a size" in bad.stderr, "bad --gpu-mem refused: %r" % bad.stderr)
print("mem_plan_paper: %d failed" % fails)
sys.exit(1 if fails else 0)
