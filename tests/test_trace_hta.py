#!/usr/bin/env python3
"""--trace-per-rank read by a consumer nobody here wrote (issue 43): a 2-rank ZeRO-2 run with --trace FILE
--trace-per-rank writes FILE (every rank, as before) and FILE.rank<R>.json per rank, each with PyTorch profiler's
top-level distributedInfo {backend, rank, world_size}, only that rank's events (pid R) and a ProfilerStep#k span
per traced step beside zinc's own step span; both files carry a "memory" counter (RSS and the tracker's bytes
per kind, MiB) at each traced step's end, and flow events (ph s/f) from each waited-for reduce-scatter's issue to
its wait. Checked with the standard library; then HolisticTraceAnalysis
(PyPI; --python, or ZINC_HTA_PYTHON, names a Python that has it) loads the two files as ranks 0 and 1, finds
the profiler steps, and sees each rank's collectives (reduce_scatter, all_gather) and modules. Without
HolisticTraceAnalysis the file checks still run and the test exits 77 (skipped) when they pass. Also: an
existing per-rank file is refused before training without --force, and --trace-per-rank needs --trace."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

import checks
from checks import check

HTA = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
files = {0: sys.argv[1], 1: sys.argv[2]}
a = TraceAnalysis(trace_files=files, trace_dir=sys.argv[3], include_last_profiler_step=True)
names = {}
flows = {}
for r, df in a.t.traces.items():
    flows[int(r)] = int(df["ph"].isin(["s", "f"]).sum()) if "ph" in df.columns else -1
    names[int(r)] = sorted({a.t.symbol_table.sym_table[i] for i in df["name"].unique()})
print(json.dumps({"ranks": sorted(int(r) for r in a.t.traces.keys()),
                  "steps": [int(s) for s in a.get_profiler_steps()], "names": names, "flows": flows}))
"""


def run(cmd, env=None, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    check(p.returncode == expect, f"{' '.join(cmd)}: exit {p.returncode}, want {expect}\n{p.stdout[-2000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--python", default=sys.executable, help="a Python with HolisticTraceAnalysis")
    a = ap.parse_args()
    a.python = os.environ.get("ZINC_HTA_PYTHON") or a.python
    d = a.workdir
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cfg = os.path.join(d, "ds_config.json")
    # overlap_comm with one module per bucket: reduce-scatters waited for, so the files carry flows
    json.dump({"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_comm": True,
                                                             "reduce_bucket_size": 4500},
               "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}, open(cfg, "w"))
    trace = os.path.join(d, "run.trace.json")
    z = [a.zinc, "train", "--threads", "1", "--quiet", "--config", cfg, "--steps", "4"]
    mpi = shlex.split(a.mpirun) + ["-np", "2"]
    run(mpi + z + ["--trace", trace, "--trace-steps", "1:3", "--trace-per-rank"])
    whole = json.load(open(trace))
    check({e["pid"] for e in whole["traceEvents"]} == {0, 1}, "the combined file has both ranks")
    check(not any(e.get("name", "").startswith("ProfilerStep") for e in whole["traceEvents"]),
          "the combined file keeps zinc's own step spans only")
    paths = [f"{trace}.rank{r}.json" for r in (0, 1)]
    for r, p in enumerate(paths):
        if not check(os.path.exists(p), f"{p} missing"):
            return 1
        t = json.load(open(p))
        check(t.get("distributedInfo") == {"backend": "mpi", "rank": r, "world_size": 2},
              f"rank {r}: distributedInfo {t.get('distributedInfo')}")
        ev = t["traceEvents"]
        check({e["pid"] for e in ev} == {r}, f"rank {r}: events of pids {sorted({e['pid'] for e in ev})}")
        steps = sorted(e["args"]["step"] for e in ev if e.get("cat") == "step")
        marks = sorted(int(e["name"].split("#")[1]) for e in ev if e.get("name", "").startswith("ProfilerStep#"))
        check(steps == [1, 2, 3] and marks == steps, f"rank {r}: steps {steps}, ProfilerStep markers {marks}")
        mine = sorted((e["name"], e["ts"]) for e in whole["traceEvents"] if e["pid"] == r and e["ph"] == "X")
        phases = ("forward", "backward", "recompute")
        own = sorted((e["args"]["module"] if e["cat"] in phases else e["name"], e["ts"]) for e in ev
                     if e["ph"] == "X" and not e["name"].startswith("ProfilerStep"))
        check(mine == own, f"rank {r}: its file's spans differ from its spans in the combined file")
        # forward and backward of a module differ: by name in the per-rank file, by colour (cname) in both
        mods = [e for e in ev if e.get("cat") in phases]
        check(mods and all(e["name"] == f"{e['args']['module']} {e['cat']}" for e in mods),
              f"rank {r}: module span names {sorted({e['name'] for e in mods})}")
        cn = {(e["cat"], e.get("cname")) for e in whole["traceEvents"] if e.get("cat") in phases and e["pid"] == r}
        check(len({c for _, c in cn}) == len({p for p, _ in cn}) == 2 and None not in {c for _, c in cn},
              f"rank {r}: forward and backward colours {cn}")
        # flows from each waited-for reduce-scatter's issue to its wait, the same in both files
        for where, evs in (("its file", ev), ("the combined file", [e for e in whole["traceEvents"] if e["pid"] == r])):
            fl = sorted((e["ph"], e["id"], e["tid"], e["ts"]) for e in evs if e.get("ph") in ("s", "f"))
            check(len(fl) >= 2 and sum(p == "s" for p, *_ in fl) == sum(p == "f" for p, *_ in fl),
                  f"rank {r}: flow events in {where}: {fl[:6]}")
            if where == "its file":
                mine_flows = fl
            else:
                check(fl == mine_flows, f"rank {r}: its file's flows differ from the combined file's")
        # memory counters: one per traced step's end, in both files
        for where, evs in (("its file", ev), ("the combined file", [e for e in whole["traceEvents"] if e["pid"] == r])):
            mem = [e for e in evs if e.get("ph") == "C" and e.get("name") == "memory"]
            check(len(mem) == 3 and all(e["args"].get("rss_mib", 0) > 0 and e["args"].get("host_mib", 0) > 0
                                        for e in mem), f"rank {r}: memory counters in {where}: {mem}")
    # an existing per-rank file is refused before training (the combined file may be replaced with --force)
    os.remove(trace)
    out = run(mpi + z + ["--trace", trace, "--trace-per-rank"], expect=1)
    check("rank0.json" in out or "rank1.json" in out, f"existing per-rank file not named:\n{out[-800:]}")
    check(not os.path.exists(trace), "refused run wrote the combined file")
    run(mpi + z + ["--trace", trace, "--trace-per-rank", "--force"])
    out = run(z + ["--trace-per-rank"], expect=2)
    check("--trace-per-rank needs --trace" in out, f"--trace-per-rank without --trace:\n{out[-400:]}")
    if checks.failures:
        return 1

    p = subprocess.run([a.python, "-c", "import hta"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(f"SKIP: {a.python} cannot import HolisticTraceAnalysis (pip install HolisticTraceAnalysis, or set "
              f"ZINC_HTA_PYTHON): {p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.returncode}")
        return 77
    p = subprocess.run([a.python, "-c", HTA, paths[0], paths[1], d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    if not check(p.returncode == 0, f"HolisticTraceAnalysis failed ({p.returncode}):\n{p.stderr[-3000:]}"):
        return 1
    res = json.loads(p.stdout.strip().splitlines()[-1])
    check(res["ranks"] == [0, 1], f"HTA ranks {res['ranks']}")
    # HTA 0.5 with include_last_profiler_step adds one past the last marker; the three traced steps are there
    check({1, 2, 3} <= set(res["steps"]), f"HTA profiler steps {res['steps']}")
    for r in ("0", "1"):
        names = set(res["names"].get(r, []))
        check({"reduce_scatter", "all_gather"} <= names and {"fc1 forward", "fc1 backward", "fc2 forward"} <= names,
              f"HTA rank {r}: no collectives or modules among {sorted(names)}")
    print("HolisticTraceAnalysis:", res["ranks"], res["steps"], "flow events in its frames per rank (-1: it keeps no ph column):", res["flows"])
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
