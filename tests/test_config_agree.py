#!/usr/bin/env python3
"""Issue 42: `zinc config check FILE` and `zinc train --config FILE --steps 0` agree on every input of a config
fuzzer run: both accept, or both refuse with the same message (the text before its " [file:line]" trail).

Seeds: every file in ds_configs/, written out fully resolved by `zinc config check` (so every key of the
schema is present to mutate), plus files that reach the checks a run makes beyond the config's rules (device
cuda without ZINC_EXPERIMENTAL_CUDA, tensorboard/csv_monitor directories that cannot be made). Mutations
(seeded, deterministic): a value replaced by one of a list of interesting values (numbers at and past the
ranges, other types, enum names, paths), a key removed, a block replaced. Each pair of runs happens in a
fresh working directory (the monitors write beside it).

  test_config_agree.py --zinc build/zinc --configs ds_configs --workdir DIR [--count N] [--seed S]"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

import checks
from checks import check

VALUES = [0, 1, -1, 2, 3, 4, 7, 8, 16, 100, 65536, 2 ** 31, 2 ** 53, 1e-300, 1e300, 0.5, 1e-8, -0.0, True, False,
          None, "auto", "cpu", "cuda", "nvme", "none", "fp16", "bf16", "fp32", "x", "", [], {}, [0.9, 0.999],
          "/proc/zinc_no", "/dev/null/x", "mon/a", "."]
EXTRA = [{"zinc": {"device": "cuda"}}, {"csv_monitor": {"enabled": True, "output_path": "/proc/zinc_no"}},
         {"tensorboard": {"enabled": True, "output_path": "/dev/null/x"}},
         {"csv_monitor": {"enabled": True, "output_path": "mon", "job_name": "j"}},
         {"csv_monitor": {"enabled": True, "output_path": "taken", "job_name": "file"}}]


def paths(d, pre=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield pre + (k,)
            yield from paths(v, pre + (k,))


def mutate(rnd, d):
    d = json.loads(json.dumps(d))
    if rnd.random() < 0.2:
        d.update(rnd.choice(EXTRA))
    for _ in range(rnd.choice([0, 1, 1, 1, 2, 3])):
        ps = list(paths(d))
        if not ps:
            break
        p = rnd.choice(ps)
        cur = d
        for k in p[:-1]:
            cur = cur[k]
        if rnd.random() < 0.15:
            del cur[p[-1]]
        else:
            cur[p[-1]] = rnd.choice(VALUES)
    return d


def message(err):
    """The message a refusal prints, without the program's prefix and the file:line trail."""
    lines = [l for l in err.strip().splitlines() if l.strip() and "[zinc " not in l]
    if not lines:
        return ""
    m = lines[-1]
    if m.startswith("zinc train: "):
        m = m[len("zinc train: "):]
    return m.split(" [")[0].strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    env.pop("ZINC_EXPERIMENTAL_CUDA", None)
    seeds = []
    for n in sorted(os.listdir(a.configs)):
        if not n.endswith(".json"):
            continue
        p = subprocess.run([z, "config", "check", os.path.join(a.configs, n), "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, env=env)
        check(p.returncode == 0, f"config check {n}: exit {p.returncode}")
        if p.returncode == 0:
            d = json.loads(p.stdout)
            seeds.append({k: v for k, v in d.items() if not k.startswith("_")})
    rnd = random.Random(a.seed)
    agree = refused = 0
    for i in range(a.count):
        d = mutate(rnd, rnd.choice(seeds))
        run_dir = os.path.join(work, "run")
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(os.path.join(run_dir, "taken"))
        open(os.path.join(run_dir, "taken", "file"), "w").write("not a directory\n")
        f = os.path.join(run_dir, "c.json")
        json.dump(d, open(f, "w"))
        c = subprocess.run([z, "config", "check", f, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, cwd=run_dir, env=env, timeout=60)
        t = subprocess.run([z, "train", "--config", f, "--steps", "0", "--threads", "1", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=run_dir, env=env,
                           timeout=120)
        same = (c.returncode == 0) == (t.returncode == 0)
        if same and c.returncode != 0:
            refused += 1
            same = message(c.stderr) != "" and message(c.stderr) in t.stderr
        agree += same
        if not check(same, f"input {i}: config check exit {c.returncode}, train --steps 0 exit {t.returncode}:\n"
                           f"  {json.dumps(d)[:400]}\n  check: {c.stderr.strip()[-300:]}\n"
                           f"  train: {t.stderr.strip()[-300:]}"):
            json.dump(d, open(os.path.join(work, f"disagree_{i}.json"), "w"))
    print(f"config_agree: {agree} of {a.count} inputs agree ({refused} refused by both, same message); "
          f"seed {a.seed}")
    print("FAIL" if checks.failures else "ok", f"({checks.failures} failures)")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
