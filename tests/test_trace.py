#!/usr/bin/env python3
"""`zinc train --trace FILE` (issue 26, item 1): the timeline file parsed with Python's json and checked.

  --part ranks     the MLP at 1, 2 and 4 ranks: one process per rank, spans nest on every track, the step
                   window honoured (--trace-steps), module names, collectives with their bytes, data spans
  --part stages    stages 0, 1 and 3 at 2 ranks: each stage's collectives, nesting, the window
  --part clock     the clock offset estimate (for ranks on other machines, forced) within its bound
  --part overlap   stage 2 at 2 ranks: with overlap_comm the reduce-scatters overlap backward module spans in
                   time and a flow (arrow) joins each one's issue to its wait, without it neither
  --part offload   offload_optimizer nvme (NVMe reads and writes with bytes) and cpu (optimizer chunks);
                   a checkpoint span with --save; stage 3 all-gathers
  --part gpt2      GPT-2 at 2 ranks, stage 3: its modules, all-gathers and reduce-scatters; with activation
                   checkpointing its recomputed forwards as recompute spans
  --part errors    bad --trace-steps, an unwritable path, an existing file without --force (and with it)
Standard library only.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import checks
from checks import check


class Runner:
    def __init__(self, a):
        self.zinc = a.zinc
        self.mpirun = shlex.split(a.mpirun)
        self.w = a.workdir
        os.makedirs(self.w, exist_ok=True)

    def cmd(self, ranks, args):
        base = [self.zinc, "train"] + args
        return base if ranks == 1 else self.mpirun + ["-np", str(ranks)] + base

    def run(self, ranks, args, expect=0):
        p = subprocess.run(self.cmd(ranks, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        if p.returncode != expect:
            print("command:", " ".join(self.cmd(ranks, args)), "\nexit", p.returncode, "expected", expect, "\n",
                  p.stdout[-3000:], flush=True)
            check(False, f"exit {p.returncode}, expected {expect}")
        return p

    def config(self, name, **zero):
        path = os.path.join(self.w, name + ".json")
        stage = zero.pop("stage", 2)
        cfg = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "zero_optimization": dict({"stage": stage}, **zero), "steps_per_print": 0}
        json.dump(cfg, open(path, "w"))
        return path

    def trace(self, name, ranks, args, steps="1:3"):
        path = os.path.join(self.w, name + ".trace.json")
        if os.path.exists(path):
            os.unlink(path)
        self.run(ranks, args + ["--trace", path, "--trace-steps", steps, "--quiet"])
        with open(path) as f:
            return json.load(f)  # must be valid JSON


MLP = ["--hidden", "64", "--depth", "2", "--in-dim", "64"]  # modules fc1, fc2 (4160 elements), fc3 (520)


def spans(t, cat=None, pid=None):
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and (cat is None or e.get("cat") == cat)
            and (pid is None or e["pid"] == pid)]


def track_names(t):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def check_nesting(t, what):
    """Spans on one (pid, tid) nest: a span that starts inside another ends inside it."""
    by = {}
    for e in spans(t):
        by.setdefault((e["pid"], e["tid"]), []).append(e)
    bad = 0
    for key, es in by.items():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in es:
            s, f = e["ts"], e["ts"] + e["dur"]
            while stack and stack[-1][1] <= s + 1e-3:
                stack.pop()
            if stack and f > stack[-1][1] + 1e-3:
                if bad < 3:
                    print(f"  {what}: track {key}: {e['name']} [{s}, {f}] crosses {stack[-1][2]} "
                          f"[{stack[-1][0]}, {stack[-1][1]}]")
                bad += 1
            stack.append((s, f, e["name"]))
    check(bad == 0, f"{what}: {bad} spans cross another on their track instead of nesting")


def check_common(t, what, ranks, first, last, window=None):
    """first..last: the steps the file holds (the window, or its part the run reached)."""
    od = t.get("otherData", {})
    check(od.get("format") == "zinc-trace 1", f"{what}: otherData.format {od.get('format')}")
    check(od.get("world_size") == ranks, f"{what}: world_size {od.get('world_size')} != {ranks}")
    check(od.get("trace_steps") == (window or [first, last]), f"{what}: trace_steps {od.get('trace_steps')}")
    check(od.get("dropped_events") == 0, f"{what}: {od.get('dropped_events')} events dropped")
    check(od.get("clock_offset_ns") == [0] * ranks and od.get("clock_error_ns") == [0] * ranks,
          f"{what}: ranks on one kernel share its clock: offsets {od.get('clock_offset_ns')}")
    procs = {e["pid"]: e["args"]["name"] for e in t["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    check(procs == {r: f"rank {r}" for r in range(ranks)}, f"{what}: processes {procs}")
    check({e["pid"] for e in spans(t)} == set(range(ranks)), f"{what}: spans of pids "
          f"{sorted({e['pid'] for e in spans(t)})}")
    for e in spans(t):
        if not (isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and "step" in e["args"]):
            check(False, f"{what}: malformed span {e}")
            break
    names = track_names(t)
    for e in spans(t):
        if (e["pid"], e["tid"]) not in names:
            check(False, f"{what}: span on an unnamed track {e}")
            break
    check_nesting(t, what)
    # the window: step spans are exactly first..last on every rank, and nothing else lies outside it
    for r in range(ranks):
        steps = sorted(e["args"]["step"] for e in spans(t, "step", r))
        check(steps == list(range(first, last + 1)), f"{what}: rank {r} step spans {steps}")
        lo, hi = window or [first, last]  # after a run shorter than the window: its last collectives
        outside = [e for e in spans(t, pid=r) if e["cat"] != "checkpoint" and not lo <= e["args"]["step"] <= hi]
        check(not outside, f"{what}: rank {r}: spans outside steps {lo}..{hi}: {outside[:2]}")
        # every module span of a step lies inside that step's span
        st = {e["args"]["step"]: e for e in spans(t, "step", r)}
        for e in spans(t, "forward", r) + spans(t, "backward", r):
            s = st.get(e["args"]["step"])
            if not s or e["ts"] < s["ts"] - 1e-3 or e["ts"] + e["dur"] > s["ts"] + s["dur"] + 1e-3:
                check(False, f"{what}: rank {r}: module span {e} is outside its step {s}")
                break


def check_aligned(t, what, ranks):
    """The ranks' clocks agree: every step's statistics all-gather, which no rank leaves before every rank
    entered it, begins on every rank before it ends on any (within a millisecond)."""
    for step in {e["args"]["step"] for e in spans(t, "step")}:
        stats = [e for e in spans(t, "engine") if e["name"] == "gradient statistics" and e["args"]["step"] == step]
        if not check(len(stats) == ranks, f"{what}: step {step}: {len(stats)} statistics spans"):
            continue
        latest_start = max(e["ts"] for e in stats)
        earliest_end = min(e["ts"] + e["dur"] for e in stats)
        check(latest_start <= earliest_end + 1000, f"{what}: step {step}: a rank entered the statistics all-gather "
              f"{(latest_start - earliest_end) / 1e3:.3f} ms after another had left it (clocks not aligned)")


def part_clock(r):
    """The offset estimate for ranks on other machines (forced here, where the ranks share one clock whose
    true offset is 0): each rank's estimate lies within its stated bound of 0, and the steps still line up."""
    cfg = r.config("clock", stage=2)
    os.environ["ZINC_TRACE_TEST_ESTIMATE_CLOCK"] = "1"
    try:
        t = r.trace("clock", 4, ["--config", cfg, "--steps", "3"] + MLP, "1:3")
    finally:
        del os.environ["ZINC_TRACE_TEST_ESTIMATE_CLOCK"]
    od = t["otherData"]
    off, err = od.get("clock_offset_ns"), od.get("clock_error_ns")
    check(off[0] == 0 and err[0] == 0, f"rank 0's own offset {off[0]} +- {err[0]}")
    for q in (1, 2, 3):
        check(0 < err[q] and abs(off[q]) <= err[q], f"rank {q}: offset {off[q]} ns, stated bound {err[q]} ns, "
              "true offset 0")
    print("estimated offsets (ns):", off, "bounds:", err)


def part_ranks(r):
    for ranks in (1, 2, 4):
        cfg = r.config(f"s2_np{ranks}", stage=2)
        t = r.trace(f"ranks{ranks}", ranks, ["--config", cfg, "--steps", "5"] + MLP, "2:4")
        what = f"mlp np{ranks}"
        check_common(t, what, ranks, 2, 4)
        for rk in range(ranks):
            mods = {e["name"] for e in spans(t, "forward", rk)}
            check(mods == {"fc1", "fc2", "fc3"}, f"{what}: rank {rk} forward modules {mods}")
            check({e["name"] for e in spans(t, "backward", rk)} == mods, f"{what}: rank {rk} backward modules")
            check(all(e["args"].get("module") == e["name"] for e in spans(t, "forward", rk)),
                  f"{what}: args.module")
            check(len(spans(t, "data", rk)) == 3 * 8 // ranks, f"{what}: rank {rk}: "
                  f"{len(spans(t, 'data', rk))} data spans, want one per micro-step ({3 * 8 // ranks})")
            opt = spans(t, "optimizer", rk)
            check(opt and all(e["name"] == "Adam" for e in opt) and
                  all(e["args"].get("elements", 0) > 0 for e in opt), f"{what}: optimizer chunks {opt[:2]}")
            comm = spans(t, "comm", rk)
            if ranks > 1:
                rs = [e for e in comm if e["name"] == "reduce_scatter"]
                ag = [e for e in comm if e["name"] == "all_gather"]
                check(rs and all(e["args"].get("bytes", 0) > 0 for e in rs), f"{what}: reduce-scatters {rs[:2]}")
                check(len(ag) == 3 and all(e["args"].get("bytes", 0) > 0 for e in ag),
                      f"{what}: one parameter all-gather per step, with bytes: {ag[:2]}")
        if ranks > 1:
            check_aligned(t, what, ranks)
            names = track_names(t)
            comm_tracks = {names[(e["pid"], e["tid"])] for e in spans(t, "comm")}
            check(all(n.startswith("comm") for n in comm_tracks), f"{what}: comm spans on tracks {comm_tracks}")


def part_stages(r):
    """Stages 0, 1 and 3 at 2 ranks (stage 2: part ranks): each stage's collectives, nesting, the window."""
    want = {0: {"all_reduce"}, 1: {"reduce_scatter", "all_gather"}, 3: {"reduce_scatter", "all_gather"}}
    for stage in (0, 1, 3):
        cfg = r.config(f"st{stage}", stage=stage, **({"stage3_param_persistence_threshold": 0} if stage == 3 else {}))
        t = r.trace(f"stage{stage}", 2, ["--config", cfg, "--steps", "3"] + MLP, "2:3")
        what = f"mlp stage {stage} np2"
        check_common(t, what, 2, 2, 3)
        for rk in range(2):
            comm = {e["name"] for e in spans(t, "comm", rk) if e["args"].get("bytes", 0) > 0}
            check(comm == want[stage], f"{what}: rank {rk}: collectives {comm}, want {want[stage]}")
            check({e["name"] for e in spans(t, "backward", rk)} == {"fc1", "fc2", "fc3"}, f"{what}: modules")


def overlaps(a, b):
    return min(a["ts"] + a["dur"], b["ts"] + b["dur"]) - max(a["ts"], b["ts"]) > 0


def part_overlap(r):
    # fc1, fc2 have 4160 elements and fc3 520: a 4500-element bucket holds one module, so each module's
    # gradients are sent while the next module's backward runs (overlap_comm) or before it starts (not)
    for overlap in (True, False):
        cfg = r.config(f"ov{int(overlap)}", stage=2, overlap_comm=overlap, reduce_bucket_size=4500,
                       contiguous_gradients=True)
        t = r.trace(f"overlap{int(overlap)}", 2, ["--config", cfg, "--steps", "3"] + MLP, "1:3")
        what = f"overlap_comm {overlap}"
        check_common(t, what, 2, 1, 3)
        for rk in range(2):
            rs = [e for e in spans(t, "comm", rk) if e["name"] == "reduce_scatter"]
            bwd = spans(t, "backward", rk)
            hits = [(c["args"].get("bucket"), b["name"]) for c in rs for b in bwd if overlaps(c, b)]
            check(rs and bwd, f"{what}: rank {rk}: {len(rs)} reduce-scatters, {len(bwd)} backward spans")
            if overlap:
                check(len(hits) >= 3, f"{what}: rank {rk}: only {len(hits)} reduce-scatter/backward overlaps")
            else:
                check(not hits, f"{what}: rank {rk}: reduce-scatters overlap backward spans: {hits[:4]}")
            # flows: an arrow from each reduce-scatter waited for to its wait (none when each blocks), and one
            # into every reduce-scatter from the backward span that produced its bucket's last gradient
            n, producers = check_flows(t, rk, "reduce_scatter")
            check(n >= 3 if overlap else n == 0, f"{what}: rank {rk}: {n} issue-to-wait flows")
            for c in rs:
                b = producers.get(id(c))
                done = [x for x in bwd if x["ts"] + x["dur"] <= c["ts"]]
                last = max(done, key=lambda x: x["ts"] + x["dur"]) if done else None
                check(b is not None and b is last, f"{what}: rank {rk}: reduce-scatter of bucket "
                      f"{c['args'].get('bucket')} at {c['ts']}: flow from {b}, want the last backward span before "
                      f"it ({last})")


def check_flows(t, rk, name):
    """The rank's flow events ("ph" s and f, cat flow): each id once as a start and once as an end ("bp":"e"),
    both bound to a span's start on their track, ids never shared with another rank. A flow joins a comm span
    to its wait, or a backward span to the reduce-scatter of the bucket its gradients completed. Returns how
    many issue-to-wait flows of collectives called `name` the rank has, and the producers: id(comm span) ->
    the backward span flowing into it (each comm span at most one)."""
    ev = t["traceEvents"]
    at = {(e["pid"], e["tid"], e["ts"]): e for e in ev if e["ph"] == "X"}
    flows = {}
    for e in ev:
        if e["ph"] in ("s", "f"):
            check(e.get("cat") == "flow" and (e["ph"] == "s" or e.get("bp") == "e"), f"flow event {e}")
            flows.setdefault(e["id"], []).append(e)
    n, producers = 0, {}
    for fid, pair in flows.items():
        if pair[0]["pid"] != rk:
            continue
        check(sorted(p["ph"] for p in pair) == ["f", "s"] and {p["pid"] for p in pair} == {rk},
              f"rank {rk}: flow {fid}: {pair}")
        ends = {p["ph"]: at.get((p["pid"], p["tid"], p["ts"])) for p in pair}
        s, f = ends.get("s"), ends.get("f")
        if s and s["cat"] == "backward":
            check(f and f["cat"] == "comm" and f["name"] == "reduce_scatter" and id(f) not in producers,
                  f"rank {rk}: flow {fid} joins {s} and {f}, want a backward span to one reduce-scatter")
            if f:
                producers[id(f)] = s
            continue
        check(s and s["cat"] == "comm" and f and f["cat"] == "wait" and s["name"] == f["name"],
              f"rank {rk}: flow {fid} joins {s} and {f}, want a comm span to its wait")
        n += bool(s and s["name"] == name)
    return n, producers


def part_offload(r):
    nv = os.path.join(r.w, "nvme")
    os.makedirs(nv, exist_ok=True)
    cfg = r.config("nvme", stage=2, offload_optimizer={"device": "nvme", "nvme_path": nv})
    probe = subprocess.run(r.cmd(1, ["--config", cfg, "--steps", "1", "--quiet"] + MLP), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    if probe.returncode != 0:
        print("offload nvme: the NVMe store is not usable here, not checked:", probe.stdout[-300:])
    else:
        for ranks in (1, 2):
            t = r.trace(f"nvme{ranks}", ranks, ["--config", cfg, "--steps", "3"] + MLP, "1:3")
            what = f"nvme np{ranks}"
            check_common(t, what, ranks, 1, 3)
            for rk in range(ranks):
                nvme = spans(t, "nvme", rk)
                kinds = {e["name"] for e in nvme}
                check(kinds == {"read", "write"}, f"{what}: rank {rk}: NVMe spans {kinds}")
                check(all(e["args"].get("bytes", 0) > 0 and e["args"].get("ok") == 1 for e in nvme),
                      f"{what}: NVMe spans without bytes: {nvme[:2]}")
                names = track_names(t)
                check(all(names[(e["pid"], e["tid"])].startswith("nvme") for e in nvme), f"{what}: NVMe tracks")
    # cpu offload at stage 3 with a final checkpoint: chunks, all-gathers, the save
    cfg = r.config("cpu3", stage=3, offload_optimizer={"device": "cpu"}, sub_group_size=3000,
                   stage3_param_persistence_threshold=0)
    save = os.path.join(r.w, "ck")
    t = r.trace("cpu3", 2, ["--config", cfg, "--steps", "3", "--save", save] + MLP, "1:5")
    what = "cpu offload stage 3 np2"
    check_common(t, what, 2, 1, 3, [1, 5])  # the run is shorter than the window: written at its end
    for rk in range(2):
        ck = spans(t, "checkpoint", rk)
        # one save, its publish (manifest and `latest`, runtime/checkpoint/checkpoint_save.c) inside it
        sv = [e for e in ck if e["name"] == "save"]
        pb = [e for e in ck if e["name"] == "publish"]
        check(len(sv) == 1 and sv[0]["args"].get("ok") == 1 and len(pb) + len(sv) == len(ck) and len(pb) <= 1
              and all(sv[0]["ts"] <= e["ts"] and e["ts"] + e["dur"] <= sv[0]["ts"] + sv[0]["dur"] + 1 for e in pb),
              f"{what}: rank {rk}: checkpoint spans {ck}")
        st = max(e["ts"] + e["dur"] for e in spans(t, "step", rk))
        check(ck and ck[0]["ts"] >= st, f"{what}: rank {rk}: the final save is not after the last step")
        opt = spans(t, "optimizer", rk)
        check(len({e["args"]["chunk"] for e in opt}) > 1, f"{what}: rank {rk}: one optimizer chunk only")
        ag = [e for e in spans(t, "comm", rk) if e["name"] == "all_gather"]
        check(ag and all(e["args"].get("bytes", 0) > 0 for e in ag), f"{what}: rank {rk}: stage-3 all-gathers")
    # resuming: the load is on the timeline too, and the window follows the checkpoint's step count
    t = r.trace("resume", 2, ["--config", cfg, "--steps", "5", "--resume", save] + MLP, "4:5")
    check_common(t, "resume", 2, 4, 5)
    check(all([e["name"] for e in spans(t, "checkpoint", rk)] == ["load"] for rk in range(2)), "resume: load spans")


def part_gpt2(r):
    tok = os.path.join(r.w, "tok.bin")
    data = subprocess.run([r.zinc, "train", "--model", "gpt2", "--help"], stdout=subprocess.PIPE, text=True).stdout
    if "--data" not in data:
        check(False, "zinc train --model gpt2 --help names no --data")
        return
    # llm.c's token file: a 256-int header (magic 20240520, version 1, count) and uint16 tokens
    import struct
    import random
    rnd = random.Random(7)
    n = 20000
    with open(tok, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *[rnd.randrange(256) for _ in range(n)]))
    cfg = r.config("gpt2_s3", stage=3)
    t = r.trace("gpt2", 2, ["--model", "gpt2", "--config", cfg, "--data", tok, "--vocab", "256", "--context", "32",
                            "--layers", "2", "--heads", "2", "--width", "64", "--steps", "3"], "2:3")
    check_common(t, "gpt2 np2", 2, 2, 3)
    cfg_ac = os.path.join(r.w, "gpt2_ac.json")
    c = json.load(open(cfg))
    c["activation_checkpointing"] = {"partition_activations": False}
    json.dump(c, open(cfg_ac, "w"))
    tac = r.trace("gpt2_ac", 1, ["--model", "gpt2", "--config", cfg_ac, "--data", tok, "--vocab", "256", "--context",
                                 "32", "--layers", "2", "--heads", "2", "--width", "64", "--steps", "2"], "1:2")
    check_common(tac, "gpt2 activation checkpointing", 1, 1, 2)
    rec = spans(tac, "recompute", 0)
    check(rec and all(e["args"].get("module") == e["name"] for e in rec),
          f"gpt2 activation checkpointing: recompute spans {[e['name'] for e in rec][:4]}")
    for rk in range(2):
        mods = {e["name"] for e in spans(t, "forward", rk)}
        check(len(mods) >= 3, f"gpt2: rank {rk} forward modules {mods}")
        comm = {e["name"] for e in spans(t, "comm", rk)}
        check({"all_gather", "reduce_scatter"} <= comm, f"gpt2: rank {rk} collectives {comm}")


def part_errors(r):
    cfg = r.config("err", stage=1)
    base = ["--config", cfg, "--steps", "2"] + MLP
    out = os.path.join(r.w, "e.trace.json")
    if os.path.exists(out):
        os.unlink(out)
    for bad in ("0:3", "5:2", "abc", "3", "1:", "-1:2", "2:3x"):
        p = r.run(1, base + ["--trace", out, "--trace-steps", bad], expect=2)
        check("--trace-steps" in p.stdout and "1 <= A <= B" in p.stdout, f"--trace-steps {bad}: {p.stdout[-300:]}")
    p = r.run(1, base + ["--trace-steps", "1:2"], expect=2)
    check("--trace-steps needs --trace" in p.stdout, f"--trace-steps alone: {p.stdout[-300:]}")
    p = r.run(1, base + ["--trace", os.path.join(r.w, "no", "such", "dir", "t.json")], expect=1)
    check("--trace" in p.stdout and "no/such/dir" in p.stdout, f"unwritable --trace: {p.stdout[-300:]}")
    check(not os.path.exists(out), "a refused run wrote the trace")
    with open(out, "w") as f:
        f.write("precious\n")
    for ranks in (1, 2):
        p = r.run(ranks, base + ["--trace", out], expect=1)
        check("already exists" in p.stdout and "--force" in p.stdout, f"existing --trace: {p.stdout[-300:]}")
        check(p.stdout.count("already exists") == 1, f"np{ranks}: the refusal is said once: {p.stdout[-600:]}")
        check(open(out).read() == "precious\n", "an existing --trace file was replaced without --force")
    p = r.run(1, base + ["--trace", cfg, "--force"], expect=1)  # never one of the run's inputs
    check(json.load(open(cfg))["zero_optimization"]["stage"] == 1, "--trace replaced the config")
    r.run(2, base + ["--trace", out, "--force", "--quiet"])
    t = json.load(open(out))
    check_common(t, "--force", 2, 1, 2, [1, 5])
    # a full buffer: later spans are dropped, counted and reported; the file stays valid
    os.environ["ZINC_TRACE_TEST_MAX_EVENTS"] = "1000"  # one block of 1024
    try:
        p = r.run(1, base[:3] + ["20"] + MLP + ["--trace", out, "--force", "--trace-steps", "1:20"])
    finally:
        del os.environ["ZINC_TRACE_TEST_MAX_EVENTS"]
    t = json.load(open(out))
    od = t["otherData"]
    kept = len(spans(t))
    check(od["dropped_events"] > 0 and od["dropped_events_per_rank"] == [od["dropped_events"]],
          f"full buffer: dropped {od['dropped_events']}")
    check(kept <= 1024, f"full buffer: {kept} spans kept beyond the cap of 1024")
    check(f"{od['dropped_events']} spans did not fit" in p.stdout, f"full buffer: no warning: {p.stdout[-400:]}")
    check_nesting(t, "full buffer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", required=True)
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    r = Runner(a)
    {"ranks": part_ranks, "stages": part_stages, "clock": part_clock, "overlap": part_overlap, "offload": part_offload, "gpt2": part_gpt2,
     "errors": part_errors}[a.part](r)
    print("trace", a.part, "FAILED" if checks.failures else "passed", f"({checks.failures} checks.failures)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
