"""The zinc program's one option table per command (issue 24, cli/common/options.h): every command prints its --help
from the table (each option with its range or choices), and refuses alike an option without its value, a
number out of range (the range named), a bad choice (the choices named), an unknown option and a second
positional argument, all with exit status 2 before any work. The training driver runs both models through
one interface: the MLP and GPT-2 reports carry the driver's common keys and each model's own.

  test_cli_options.py --zinc build/zinc --configs ds_configs --workdir DIR"""
import argparse
import json
import os
import shutil
import subprocess
import sys

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL", what)


def run(args, timeout=120):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    z, work = os.path.abspath(a.zinc), os.path.abspath(a.workdir)
    cfg = os.path.join(os.path.abspath(a.configs), "zero2_fp16.json")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    text = os.path.join(work, "t.txt")
    open(text, "w").write("".join(chr(32 + (i * 7 + i // 13) % 90) for i in range(6000)))

    # Every command's --help: exit 0, on stdout, every option of its table with its range or choices.
    helps = [
        ([z, "train", "--help"], ["--config FILE", "--steps N", "[0..]", "--threads N", "[1..1024]", "--hidden N",
                                  "--device D", "[cpu|cuda|auto]", "--on-nonfinite P", "--set PATH=VALUE",
                                  "--model M", "ZINC_COLLECTIVE_TIMEOUT_S", "--trace FILE",
                                  "--trace-steps A:B", "(default 100)", "(default mlp)", "(default 1234)",
                                  "(default: cores / ranks on the node)", "(default 1:5)", "(default error)",
                                  "input features (default 32)"]),
        ([z, "train", "--model", "gpt2", "--help"], ["--layers L", "[1..1024]", "--text FILE", "--sample-tokens N",
                                                     "[1..65536]", "--steps N", "--save DIR", "--resume PATH",
                                                     # the defaults, from the tables; --model's although
                                                     # --model gpt2 came before --help
                                                     "transformer blocks (default 4)", "(default mlp)",
                                                     "(default 256 with --text, else 50257)",
                                                     "(default: V rounded up to a multiple of 64)",
                                                     "tokens per sample (default 64)", "(default auto)"]),
        ([z, "config", "check", "--help"], ["--world-size N", "[1..16777216]", "--set PATH=VALUE", "_defaults",
                                            "(default 1)"]),
        ([z, "config", "--help"], ["--world-size N", "(default 1)"]),
        ([z, "checkpoint", "export", "--help"], ["(default safetensors)", "(default fp32)"]),
        ([z, "mem", "--help"], ["--params N", "--gpt2 SIZE", "--offload D", "[none|cpu|nvme]", "--stage S", "[0..3]",
                                "--gpu-mem SIZE", "--units U", "--rss-tolerance PCT", "(default 1; plan: 8)",
                                "its vocabulary (default 50257)", "(default ranged)", "ZINC_MEM_HEADROOM % (10 unless set)"]),
        ([z, "mem", "plan", "--help"], ["--gpu-mem SIZE", "--paper", "(default 1024)"]),
        ([z, "checkpoint", "--help"], ["inspect", "--verify", "--params N", "--format F", "[safetensors|llmc|hf]",
                                       "--dtype T", "[fp32|bf16|fp16]", "--force"]),
        ([z, "checkpoint", "inspect", "--help"], ["--verify", "--params N", "[0..1000000000]"]),
        ([z, "checkpoint", "export", "--help"], ["--out FILE", "--vocab V"]),
        ([z, "launch", "--help"], ["-n N", "--min-ranks M", "[1..65536]", "--max-restarts K", "[0..1000]",
                                   "--hostfile FILE", "--probe-timeout S", "--mpirun CMD", "--launcher L",
                                   "[auto|mpirun|srun]", "--srun CMD", "SLURM_NTASKS", "(default 3)",
                                   "(default \"mpirun\")", "(default \"srun\")", "(default: N, no shrinking)"]),
    ]
    for args, needles in helps:
        rc, out, err = run(args)
        missing = [n for n in needles if n not in out]
        check(rc == 0 and not missing, f"{args[1:]}: exit {rc}, help lacks {missing}: {(out + err)[:300]!r}")

    # Misuse, command by command: exit 2, the message naming the option and what is valid.
    tr = [z, "train", "--config", cfg, "--quiet"]
    g2 = [z, "train", "--model", "gpt2", "--config", cfg, "--text", text, "--quiet"]
    misuse = [
        (tr + ["--threads", "0"], "--threads needs an integer in 1..1024, got \"0\""),
        (tr + ["--threads", "x"], "--threads needs an integer in 1..1024"),
        (tr + ["--hidden", "65537"], "--hidden needs an integer in 1..65536"),
        (tr + ["--device", "gpu"], "--device must be cpu, cuda or auto, got \"gpu\""),
        (tr + ["--on-nonfinite", "ignore"], "--on-nonfinite must be error or skip"),
        (tr + ["--model", "gpt2", "--model", "mlp"], "--model is given twice"),
        (tr + ["--model", "llama"], "--model must be mlp or gpt2, got \"llama\""),
        (tr + ["--layers", "2"], "unknown option \"--layers\""),
        (tr + ["extra"], "unexpected argument \"extra\""),
        (tr + ["--report", ""], "--report needs a value (FILE), got an empty one"),
        (tr + ["--save-every", "2"], "--save-every needs --save DIR"),
        (tr + ["--trace-steps", "1:2"], "--trace-steps needs --trace FILE"),
        (tr + ["--trace", "t.json", "--trace-steps", "0:2"], "--trace-steps 0:2: want A:B"),
        (tr + ["--trace", ""], "--trace needs a value (FILE), got an empty one"),
        ([z, "train", "--steps", "3"], "--config FILE is required"),
        (g2 + ["--layers", "0"], "--layers needs an integer in 1..1024"),
        (g2 + ["--val-data"], "--val-data needs a value"),
        (g2 + ["--hidden", "4"], "unknown option \"--hidden\""),
        ([z, "train", "--model", "gpt2", "--config", cfg, "--quiet"], "one of --data FILE"),
        ([z, "config", "check", cfg, "--world-size", "0"], "--world-size needs an integer in 1..16777216"),
        ([z, "config", "check", cfg, "--set"], "--set needs PATH=VALUE"),
        ([z, "mem", "estimate", "--params", "1e6", "--stage", "4"], "--stage needs an integer in 0..3"),
        ([z, "mem", "estimate", "--params", "1e6", "--offload", "disk"], "--offload must be none, cpu or nvme"),
        ([z, "mem", "plan", "--params", "1e6", "--gpu-mem", "80XB"], "--gpu-mem needs a size"),
        ([z, "mem", "estimate", "--params", "1e6", "--json", "--csv"], "give --json or --csv, not both"),
        ([z, "mem", "estimate", "--params"], "--params needs a value"),
        ([z, "checkpoint", "inspect", "a", "b"], "one checkpoint path, got \"b\" too"),
        ([z, "checkpoint", "inspect", "a", "--params", "x"], "--params needs an integer in 0..1000000000"),
        ([z, "checkpoint", "export", "a", "--out", "o", "--dtype", "fp8"], "--dtype must be fp32, bf16 or fp16"),
        ([z, "checkpoint", "export", "a", "--out", "o", "--format", "llmc", "--dtype", "fp16"], "--format llmc takes"),
        ([z, "checkpoint", "export", "a", "--out", "o", "--vocab", "3"], "--vocab and --heads are for --format llmc"),
        ([z, "checkpoint", "export", "a", "--out", "o", "--vocab", "0", "--format", "llmc"],
         "--vocab needs an integer in 1..65536"),
        ([z, "launch", "-n", "2", "--min-ranks", "0", "--", z, "train"], "--min-ranks needs an integer in 1..65536"),
        ([z, "launch", "-n", "2", "--probe-timeout", "0", "--", z, "train"], "--probe-timeout needs an integer in"),
        ([z, "launch", "-n", "2", "--hostfile", "--", z, "train"], "--hostfile needs a value"),
        ([z, "launch", "-n", "2", "--launcher", "pbs", "--", z, "train"], "--launcher must be auto, mpirun or srun"),
    ]
    for args, needle in misuse:
        rc, out, err = run(args)
        check(rc == 2 and needle in err, f"{args[1:]}: exit {rc}, stderr {err[:300]!r} (wanted {needle!r})")

    # One driver, two models: both reports carry the driver's keys, each with its model's own.
    common = ["model", "config", "world_size", "zero_stage", "steps", "steps_taken", "steps_skipped", "first_loss",
              "final_loss", "final_lr", "parameters", "param_l2_norm", "param_checksum", "seconds", "resumed_from_step",
              "losses", "lrs", "loss_scales", "step_seconds"]
    for args, model, own in [(tr + ["--steps", "3", "--threads", "1", "--report", "m.json"], "mlp",
                              ["final_accuracy"]),
                             (g2 + ["--steps", "2", "--layers", "1", "--width", "16", "--heads", "2", "--context", "8",
                                    "--threads", "1", "--val-every", "1", "--val-batches", "64", "--report", "g.json"],
                              "gpt2",
                              ["shape", "tokens_per_step", "sample", "val_losses"])]:
        rc, out, err = run(args, timeout=300)
        path = args[args.index("--report") + 1]
        r = json.load(open(path)) if rc == 0 and os.path.exists(path) else {}
        lacks = [k for k in common + own if k not in r]
        steps = int(args[args.index("--steps") + 1])
        check(rc == 0 and r.get("model") == model and not lacks and r.get("steps") == steps,
              f"{model} report: exit {rc}, lacks {lacks}: {err[-300:]!r}")
        # one time per step, each positive, together at most the run's (they leave out start-up and saves)
        st = r.get("step_seconds", [])
        check(len(st) == steps and all(x > 0 for x in st) and sum(st) <= r.get("seconds", 0) + 1e-6,
              f"{model} report: step_seconds {st} against {steps} steps in {r.get('seconds')} s")
        # an invariant of the model/engine split: only the training steps' engine calls count. The validation
        # after every step (64 batches here) enters modules too; counted, it made the engine's share exceed the
        # steps' time at stage 3 over a slow link (85 s of 59 s). At this size its calls are too cheap for this
        # check to catch that; it guards the split's sign and bounds.
        split = r.get("time_split")
        if model == "gpt2":
            check(split and 0 <= split["engine_s"] <= split["train_steps_s"] and split["model_compute_s"] >= 0,
                  f"gpt2 report: time_split {split}")
    # torchrun's environment without MPI (issue 43): refused with the mpirun command to use, said by rank 0 only;
    # WORLD_SIZE 1, or the same variables under mpirun/srun, start as usual
    tr_args = [z, "train", "--config", cfg, "--steps", "1", "--threads", "1"]
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")}
    for rank in (0, 1):
        env = dict(clean, RANK=str(rank), WORLD_SIZE="4", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1")
        p = subprocess.run(tr_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
        want = f"mpirun -np 4 zinc train --config {cfg} --steps 1 --threads 1"
        check(p.returncode == 2 and (want in p.stderr and "torchrun" in p.stderr) == (rank == 0),
              f"torchrun rank {rank}: exit {p.returncode}, stderr {p.stderr[-400:]!r}")
    env = dict(clean, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    p = subprocess.run(tr_args + ["--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=120)
    check(p.returncode == 0, f"torchrun WORLD_SIZE=1: exit {p.returncode}: {p.stderr[-300:]!r}")
    env = dict(clean, RANK="0", WORLD_SIZE="4", LOCAL_RANK="0", SLURM_PROCID="0")
    p = subprocess.run([z, "train", "--config", "/nonexistent.json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=60)
    check("torchrun" not in p.stderr, f"srun's rank with torch's variables refused as torchrun: {p.stderr[-300:]!r}")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
