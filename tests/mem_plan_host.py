#!/usr/bin/env python3
"""`zinc mem plan --host-mem SIZE` without --gpu-mem (the host plan of a CPU machine), GPT-2 small with small
buckets and gather limits (the config below), fp32, AdamW:

- every stage x offload_optimizer x offload_param row is there (offload_param only at stage 3), stage 0 with
  optimizer offload refused with the config's reason; each row's NVMe bytes (by category) equal
  `zinc mem estimate --device cpu --json` for that config written out as a file (not through the plan's
  overrides), host bytes at least its host + pinned totals, disk IO per step the stated rule (also with
  gradient_accumulation_steps 4);
- --host-mem 8GiB: the cheapest is one without NVMe traffic, the least host memory among them;
- --host-mem 1GiB: only stage 3 with the optimizer state and the parameters on NVMe fits, and it is chosen;
- the headroom rule: --host-mem at exactly that row's bytes fits with ZINC_MEM_HEADROOM=0, not with 10;
- --host-mem 400MiB: nothing fits; the closest (the least bytes missing, host and NVMe) misses by ceil(host x 1.1) - 400MiB, named in the text with
  the --host-mem that fits, and the fewest nodes (1 rank each) where one fits, which is checked by planning
  again at that count; --nvme too small: the NVMe shortfall;
- CSV; error paths: a bad size, --nvme where no planned choice uses NVMe, --ranks not spread over --nodes,
  --ranks with --gpu-mem, --plot, neither --gpu-mem nor --host-mem.

    mem_plan_host.py ZINC_BINARY WORKDIR
"""
import json
import math
import os
import subprocess
import sys

zinc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
GiB, MiB = 2 ** 30, 2 ** 20
fails = 0

CONFIG = {
    "train_micro_batch_size_per_gpu": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e5, "stage3_prefetch_bucket_size": 1e5,
                          "stage3_max_live_parameters": 1e6, "stage3_max_reuse_distance": 0,
                          "sub_group_size": 1e6,
                          "offload_optimizer": {"device": "none", "nvme_path": "/tmp", "buffer_count": 4},
                          "offload_param": {"device": "none", "nvme_path": "/tmp", "buffer_size": 1e6,
                                            "max_in_cpu": 0}},
}
base = os.path.join(work, "host_plan.json")
with open(base, "w") as f:
    json.dump(CONFIG, f)


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([zinc, "mem"] + list(args), capture_output=True, text=True, env=e)


def plan(*extra, env=None, fmt="--json"):
    r = run("plan", "--gpt2", "small", "--config", base, *extra, *([fmt] if fmt else []), env=env)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
    check(r.returncode == 0, "plan %s: exit %d" % (" ".join(extra), r.returncode))
    return json.loads(r.stdout) if fmt == "--json" and r.returncode == 0 else r.stdout


def key(row):
    return (row["stage"], row["offload_optimizer"], row["offload_param"])


def choice(c):
    return (c["stage"], c["offload_optimizer"], c["offload_param"]) if c else None


# ---- the rows, against the estimate
j = plan("--host-mem", "8GiB")
rows = {key(r): r for r in j["plan"]}
want = [(s, a, "none") for s in range(3) for a in ("none", "cpu", "nvme")]
want += [(3, a, b) for a in ("none", "cpu", "nvme") for b in ("none", "cpu", "nvme")]
check([key(r) for r in j["plan"]] == want, "rows: %s" % [key(r) for r in j["plan"]])
check(j["mode"] == "host" and j["ranks"] == 1 and j["nodes"] == 1 and j["ranks_per_node"] == 1, "header")
check(j["host_mem_bytes"] == 8 * GiB and j["nvme_limit_bytes"] is None and j["headroom_pct"] == 10, "limits")
check("least data read from and written to NVMe" in j["rule"], "the rule is stated")
for a in ("cpu", "nvme"):
    r = rows[(0, a, "none")]
    check(not r["valid"] and not r["fits"] and "optimizer offload needs stage 1, 2 or 3" in r["why"],
          "stage 0 offload %s refused with the reason: %s" % (a, r))
for (s, a, b), r in rows.items():
    if not r["valid"]:
        continue
    cfg = json.loads(json.dumps(CONFIG))
    cfg["zero_optimization"]["stage"] = s
    cfg["zero_optimization"]["offload_optimizer"]["device"] = a
    cfg["zero_optimization"]["offload_param"]["device"] = b
    path = os.path.join(work, "host_plan_%d_%s_%s.json" % (s, a, b))
    with open(path, "w") as f:
        json.dump(cfg, f)
    e = run("estimate", "--gpt2", "small", "--config", path, "--device", "cpu", "--json")
    check(e.returncode == 0, "estimate %s: %s" % (path, e.stderr))
    if e.returncode:
        continue
    by = json.loads(e.stdout)["estimate"]["bytes"]
    nvme = {c: v for c, v in by["nvme"].items() if c != "total" and v}
    check(r["nvme_bytes_per_node"] == by["nvme"]["total"], "%s: NVMe %d, estimate %d" %
          ((s, a, b), r["nvme_bytes_per_node"], by["nvme"]["total"]))
    check(r["nvme_by_category"] == nvme, "%s: NVMe by category %s, estimate %s" % ((s, a, b), r["nvme_by_category"],
                                                                                   nvme))
    check(r["pinned_bytes_per_node"] == by["pinned"]["total"], "%s: pinned" % ((s, a, b),))
    check(r["host_bytes_per_node"] >= by["host"]["total"] + by["pinned"]["total"], "%s: host below the estimate's"
          % ((s, a, b),))
    par = by["nvme"]["params"] + by["nvme"].get("grads", 0)  # the parameter and gradient files: 2 gas + 1 each
    check(r["disk_io_bytes_per_step"] == 2 * (by["nvme"]["total"] - par) + 3 * par, "%s: disk IO" % ((s, a, b),))
    check((b == "nvme") == (par > 0) and (a == "nvme") == (by["nvme"]["master"] > 0), "%s: what is on NVMe" %
          ((s, a, b),))
    check(r["fits"], "%s fits in 8 GiB" % ((s, a, b),))

# ---- fits with no offload: the least host memory among the rows without disk traffic
valid = [r for r in j["plan"] if r["valid"]]
noio = min((r for r in valid if r["disk_io_bytes_per_step"] == 0), key=lambda r: r["host_bytes_per_node"])
check(choice(j["cheapest"]) == key(noio), "8 GiB: cheapest %s, want %s" % (j["cheapest"], key(noio)))
check(j["cheapest"]["offload_optimizer"] == "none" and j["cheapest"]["offload_param"] == "none",
      "8 GiB: no offload")

# ---- fits only with parameter offload to NVMe
nn = rows[(3, "nvme", "nvme")]
others = [r for r in valid if key(r) != (3, "nvme", "nvme")]
check(nn["host_bytes_per_node"] < min(r["host_bytes_per_node"] for r in others), "stage 3 nvme/nvme needs the least")
room = 1 * GiB * 100 / 110
check(nn["host_bytes_per_node"] <= room < min(r["host_bytes_per_node"] for r in others), "1 GiB separates them")
j1 = plan("--host-mem", "1GiB")
check(choice(j1["cheapest"]) == (3, "nvme", "nvme"), "1 GiB: cheapest %s" % j1["cheapest"])
check([key(r) for r in j1["plan"] if r["fits"]] == [(3, "nvme", "nvme")], "1 GiB: only nvme/nvme fits")
text = plan("--host-mem", "1GiB", fmt=None)
check("cheapest that fits: stage 3, offload_optimizer nvme, offload_param nvme" in text, "1 GiB text: " + text)

# ---- the headroom rule at the boundary
exact = str(nn["host_bytes_per_node"])
j0 = plan("--host-mem", exact, "--stage", "3", "--offload", "nvme", env={"ZINC_MEM_HEADROOM": "0"})
check(choice(j0["cheapest"]) == (3, "nvme", "nvme") and j0["headroom_pct"] == 0, "headroom 0: fits exactly")
j10 = plan("--host-mem", exact, "--stage", "3", "--offload", "nvme", env={"ZINC_MEM_HEADROOM": "10"})
check(j10["cheapest"] is None, "headroom 10: does not fit")
check(len(j0["plan"]) == 3 and all(r["stage"] == 3 and r["offload_optimizer"] == "nvme" for r in j0["plan"]),
      "--stage/--offload restrict the rows")

# ---- nothing fits: by how much, and what would (SMALL: below stage 3 nvme/nvme, whose gradient shard is on NVMe too)
SMALL, SMALL_B, SMALL_T = "400MiB", 400 * MiB, "400 MiB"
j5 = plan("--host-mem", SMALL)
check(j5["cheapest"] is None, SMALL_T + ": nothing fits")
c = j5["closest"]
need = math.ceil(nn["host_bytes_per_node"] * 110 / 100)
check(choice(c) == (3, "nvme", "nvme") and c["host_short_bytes"] == need - SMALL_B and c["nvme_short_bytes"] == 0,
      SMALL_T + ": closest %s, short %d, want %d" % (choice(c), c["host_short_bytes"], need - SMALL_B))
check(c["host_mem_needed_bytes"] == need, SMALL_T + ": the --host-mem that fits")
m = j5["more_nodes"]
check(m is not None and m["ranks"] == m["nodes"], SMALL_T + ": more nodes %s" % m)
if m:
    fit = plan("--host-mem", SMALL, "--ranks", str(m["nodes"]), "--nodes", str(m["nodes"]))
    check(choice(fit["cheapest"]) == choice(m), "at %d nodes the cheapest is the one named" % m["nodes"])
    half = m["nodes"] // 2
    if half >= 1:
        less = plan("--host-mem", SMALL, "--ranks", str(half), "--nodes", str(half))
        check(less["cheapest"] is None, "the fewest nodes: %d do not fit" % half)
text = plan("--host-mem", SMALL, fmt=None)
check("nothing fits. Closest: stage 3, offload_optimizer nvme, offload_param nvme (max_in_cpu 0), short by %.3f GiB of host memory"
      % ((need - SMALL_B) / GiB) in text and "--host-mem %.3f GiB" % (need / GiB) in text, SMALL_T + " text: " + text)
check("(--ranks %d --nodes %d)" % (m["nodes"], m["nodes"]) in text if m else False, SMALL_T + " text names the nodes")
jd = plan("--host-mem", SMALL, "--nvme", "1GiB")
cd, short = jd["closest"], []
for r in jd["plan"]:
    if r["valid"]:
        sh = max(0, math.ceil(r["host_bytes_per_node"] * 110 / 100) - SMALL_B)
        sn = max(0, r["nvme_bytes_per_node"] - GiB)
        check(r["host_short_bytes"] == sh and r["nvme_short_bytes"] == sn, "--nvme 1GiB: %s short" % (key(r),))
        short.append((sh + sn, r))
best = min(short, key=lambda t: t[0])[1]  # the least bytes missing; the first on ties
check(choice(cd) == key(best) and cd["nvme_short_bytes"] == best["nvme_short_bytes"] and
      cd["nvme_needed_bytes"] == best["nvme_bytes_per_node"], "--nvme 1GiB: closest %s, want %s" % (cd, key(best)))
check(cd["nvme_short_bytes"] > 0, "--nvme 1GiB: the closest misses NVMe too")
j1d = plan("--host-mem", "1GiB", "--nvme", "1GiB")
check(j1d["cheapest"] is None, "1 GiB host, 1 GiB NVMe: nvme/nvme needs more NVMe")

# ---- the disk traffic rule with gradient accumulation: the parameter file read twice per micro-step
gas = json.loads(json.dumps(CONFIG))
gas["gradient_accumulation_steps"] = 4
gas_path = os.path.join(work, "host_plan_gas.json")
with open(gas_path, "w") as f:
    json.dump(gas, f)
r = run("plan", "--gpt2", "small", "--config", gas_path, "--host-mem", "8GiB", "--stage", "3", "--offload", "nvme",
        "--json")
check(r.returncode == 0, "gas 4: exit %d %s" % (r.returncode, r.stderr))
if r.returncode == 0:
    g = {key(x): x for x in json.loads(r.stdout)["plan"]}[(3, "nvme", "nvme")]
    par = g["nvme_by_category"]["params"] + g["nvme_by_category"].get("grads", 0)
    check(g["disk_io_bytes_per_step"] == 2 * (g["nvme_bytes_per_node"] - par) + 9 * par, "gas 4: disk IO")

# ---- offload_param.max_in_cpu: DeepSpeed's default (1e9) keeps GPT-2 small's whole shard in memory; where that
# does not fit, the row keeps the most that does (its estimate agrees), and none where even that is short
dflt = json.loads(json.dumps(CONFIG))
del dflt["zero_optimization"]["offload_param"]["max_in_cpu"]
dflt_path = os.path.join(work, "host_plan_default_max_in_cpu.json")
with open(dflt_path, "w") as f:
    json.dump(dflt, f)


def plan_dflt(mem, fmt="--json"):
    r = run("plan", "--gpt2", "small", "--config", dflt_path, "--host-mem", mem, "--stage", "3", "--offload", "nvme",
            *([fmt] if fmt else []))
    check(r.returncode == 0, "max_in_cpu default, %s: exit %d %s" % (mem, r.returncode, r.stderr))
    return (json.loads(r.stdout) if fmt else r.stdout) if r.returncode == 0 else None


jw = plan_dflt("8GiB")
if jw:
    w = {key(x): x for x in jw["plan"]}[(3, "nvme", "nvme")]
    shard = w.get("max_in_cpu", -1)
    check(shard > 100e6 and "params" not in w["nvme_by_category"] and w["fits"],
          "8 GiB, max_in_cpu 1e9: the whole shard kept (%d), no parameter file: %s" % (shard, w))
    check(all("max_in_cpu" not in x for x in jw["plan"] if x["offload_param"] != "nvme"), "max_in_cpu only on nvme rows")
    check(w["host_bytes_per_node"] > nn["host_bytes_per_node"] and w["disk_io_bytes_per_step"] <
          nn["disk_io_bytes_per_step"], "keeping the shard costs memory and saves disk traffic")
    mid = (w["host_bytes_per_node"] + nn["host_bytes_per_node"]) / 2 * 110 / 100
    jm = plan_dflt(str(int(mid)))
    m = {key(x): x for x in jm["plan"]}[(3, "nvme", "nvme")] if jm else {}
    keep = m.get("max_in_cpu", -1)
    check(0 < keep < shard and m["fits"] and choice(jm["cheapest"]) == (3, "nvme", "nvme") and
          jm["cheapest"]["max_in_cpu"] == keep, "between the two: a partial max_in_cpu %d of %d fits: %s" %
          (keep, shard, m))
    if 0 < keep < shard:  # the estimate with that max_in_cpu gives the row's bytes; a little more does not fit
        for k in (keep, keep + keep // 50):
            c = json.loads(json.dumps(dflt))
            c["zero_optimization"].update(stage=3)
            c["zero_optimization"]["offload_optimizer"]["device"] = "nvme"
            c["zero_optimization"]["offload_param"].update(device="nvme", max_in_cpu=k)
            p = os.path.join(work, "host_plan_keep.json")
            with open(p, "w") as f:
                json.dump(c, f)
            e = run("estimate", "--gpt2", "small", "--config", p, "--device", "cpu", "--json")
            check(e.returncode == 0, "estimate with max_in_cpu %d: %s" % (k, e.stderr))
            if e.returncode == 0:
                by = json.loads(e.stdout)["estimate"]["bytes"]
                check(by["host"]["params"] >= k * 4 and (k == keep) == (by["nvme"]["total"] == m["nvme_bytes_per_node"]),
                      "max_in_cpu %d: estimate's host params %d, NVMe %d (row %d)" %
                      (k, by["host"]["params"], by["nvme"]["total"], m["nvme_bytes_per_node"]))
            r = run("plan", "--gpt2", "small", "--config", p, "--host-mem", str(int(mid)), "--stage", "3", "--offload",
                    "nvme", "--json")
            if r.returncode == 0:
                x = {key(y): y for y in json.loads(r.stdout)["plan"]}[(3, "nvme", "nvme")]
                # the config's value where it fits, else lowered to the same largest that does
                check(x["fits"] and x["max_in_cpu"] == keep,
                      "the config's max_in_cpu %d: fits %s, row keeps %d, want %d" % (k, x["fits"], x["max_in_cpu"], keep))
    txt = plan_dflt(str(int(mid)), fmt=None) or ""
    check("cheapest that fits: stage 3, offload_optimizer nvme, offload_param nvme (max_in_cpu %d)" % keep in txt,
          "text names the max_in_cpu: " + txt[-300:])

# ---- CSV
csv = plan("--host-mem", "1GiB", fmt="--csv").splitlines()
check(csv[0].startswith("stage,offload_optimizer,offload_param,valid,fits,host_bytes_per_node") and
      len(csv) == 2 + len(want) and csv[-1] == "cheapest,3,nvme,nvme", "CSV: %s" % csv[-1:])
check("3,nvme,nvme,1,1,%d," % nn["host_bytes_per_node"] in "\n".join(csv), "CSV row")

# ---- error paths
for args, msg in [
        (["--host-mem", "12XB"], "--host-mem needs a size such as 80GB"),
        (["--host-mem", "8GiB", "--nvme", "-1"], "--nvme needs a size"),
        (["--host-mem", "8GiB", "--stage", "2", "--offload", "cpu", "--nvme", "10GiB"],
         "none of the choices planned puts anything on NVMe"),
        (["--host-mem", "8GiB", "--ranks", "3", "--nodes", "2"], "does not spread evenly over --nodes"),
        (["--gpu-mem", "80GB", "--ranks", "2"], "--ranks is for the host plan"),
        (["--host-mem", "8GiB", "--plot", os.path.join(work, "x.svg")], "--plot (the host plan draws nothing)"),
        (["--nvme", "8GiB"], "--gpu-mem SIZE (GPUs) or --host-mem SIZE"),
        (["--host-mem", "8GiB", "--ranks", "0"], "--ranks needs an integer in 1.."),
]:
    r = run("plan", "--gpt2", "small", "--config", base, *args)
    check(r.returncode == 2 and msg in r.stderr, "%s: exit %d, stderr %s" % (args, r.returncode, r.stderr.strip()))

print("%d failure(s)" % fails if fails else "zinc mem plan --host-mem: all checks passed")
sys.exit(1 if fails else 0)
