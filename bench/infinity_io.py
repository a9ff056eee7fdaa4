#!/usr/bin/env python3
"""Bytes read and written per training step by each NVMe store, from a `zinc train --trace` file.

    bench/infinity_io.py TRACE.json     -> one line per step, then the mean over the steps

A step is the span from its first micro-step's start ("batch") to the end of its optimizer step ("step"),
so the trainer's validation and sample after the steps are not counted. The parameter and gradient stores
(offload/param_nvme.c) name their requests ("param swap in/out", "grad swap in/out", "param/grad prefetch");
every io_uring request is also a "read"/"write" span of offload/aio.c, so the optimizer state's bytes
(master, exp_avg, exp_avg_sq: offload/state_nvme.c) are those less the two stores'. The optimizer state's
reads issued after a step's optimizer pass (the next pass's first chunks, zstate_pass_prestart) count in
the step whose pass reads them; after the last step they are read for nothing, printed apart and not
counted in the mean."""
import json
import sys


def main(path):
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    batches = sorted(e["ts"] for e in ev if e["name"] == "batch")
    steps = sorted(e["ts"] + e["dur"] for e in ev if e["name"] == "step")
    windows, b = [], 0
    for end in steps:  # the first batch after the previous step's end starts the step
        while b < len(batches) and windows and batches[b] < windows[-1][1]:
            b += 1
        if b >= len(batches):
            break
        windows.append((batches[b], end))
    keys = ["param_read", "param_write", "grad_read", "grad_write", "state_read", "state_write"]
    rows = []
    carry = 0  # the previous step's reads issued after its optimizer pass, for this step's pass
    for lo, hi in windows:
        r = dict.fromkeys(keys + ["aio_read", "aio_write"], 0)
        r["aio_read"] = carry
        opt = [e["ts"] + e["dur"] for e in ev if e.get("cat") == "optimizer" and lo <= e["ts"] <= hi]
        pass_end = max(opt) if opt else hi
        carry = 0
        for e in ev:
            if not (lo <= e["ts"] <= hi) or "bytes" not in e.get("args", {}):
                continue
            n, by = e["name"], e["args"]["bytes"]
            if n == "read" and e.get("cat", "") != "comm" and e["ts"] > pass_end:
                carry += by  # the next step's prestarted optimizer-state reads
                continue
            if n in ("param swap in", "param prefetch"):
                r["param_read"] += by
            elif n == "param swap out":
                r["param_write"] += by
            elif n in ("grad swap in", "grad prefetch"):
                r["grad_read"] += by
            elif n == "grad swap out":
                r["grad_write"] += by
            elif n == "read" and e.get("cat", "") != "comm":
                r["aio_read"] += by
            elif n == "write" and e.get("cat", "") != "comm":
                r["aio_write"] += by
        r["state_read"] = r["aio_read"] - r["param_read"] - r["grad_read"]
        r["state_write"] = r["aio_write"] - r["param_write"] - r["grad_write"]
        r["seconds"] = (hi - lo) / 1e6
        rows.append(r)
    mib = lambda x: x / 2**20
    print("step  seconds  " + "  ".join("%11s" % k for k in keys) + "   (MiB)")
    for i, r in enumerate(rows):
        print("%4d %8.2f  " % (i + 1, r["seconds"]) + "  ".join("%11.1f" % mib(r[k]) for k in keys))
    if rows:
        m = {k: sum(r[k] for r in rows) / len(rows) for k in keys + ["seconds"]}
        tr = m["param_read"] + m["grad_read"] + m["state_read"]
        tw = m["param_write"] + m["grad_write"] + m["state_write"]
        print("mean %8.2f  " % m["seconds"] + "  ".join("%11.1f" % mib(m[k]) for k in keys))
        print("per step: read %.1f MiB, written %.1f MiB (%d steps)" % (mib(tr), mib(tw), len(rows)))
        print("IO_PER_STEP %d %d" % (tr, tw))
    if carry:
        print("after the last step: %.1f MiB of optimizer state read ahead for a step that never came "
              "(not counted)" % mib(carry))


if __name__ == "__main__":
    main(sys.argv[1])
