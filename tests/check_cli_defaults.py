"""One source per CLI default and shape rule (issue 35, goals 1 and 2), counted in cli/'s sources:
  - no "(default" in cli/ but the help printer (cli/common/options.c): --help prints each default from the option
    table (the command's default values, or the table's `later` entries), never from prose in a help string;
  - GPT-2's vocabulary 50257 written once, in cli/checkpoint/gpt2_cli.h (ZCLI_GPT2_VOCAB), and its padding rule
    (a multiple of 64) only behind zcli_gpt2_padded_vocab;
  - no subcommand dispatch by strcmp(argv[1], ...) (zcli_subcommand), no strtoll in cli/launch/launch_world.c
    (zinc train's options are read with zinc train's table);
  - no thread-count formula in cli/ (sysconf, nproc): the engine's zpool_default_threads is the one.
Usage: check_cli_defaults.py SOURCE_DIR. Exit 1 naming each file:line that breaks a rule."""
import os
import re
import sys

root = sys.argv[1]
cli = os.path.join(root, "cli")
# (what, pattern, the files allowed to hold it)
rules = [
    ("a default written in a help string (give it to the table: options.h)", re.compile(r"\(default"),
     {"cli/common/options.c"}),
    ("GPT-2's vocabulary outside ZCLI_GPT2_VOCAB", re.compile(r"\b50257\b"), {"cli/checkpoint/gpt2_cli.h"}),
    ("the vocabulary's padding rule outside zcli_gpt2_padded_vocab", re.compile(r"\+\s*63\)\s*/\s*64|/\s*64\s*\*\s*64"),
     set()),
    ("subcommands picked by strcmp (use zcli_subcommand)", re.compile(r"strcmp\(argv\[1\]"), set()),
    ("a thread-count formula (the engine's zpool_default_threads is the one)",
     re.compile(r"_SC_NPROCESSORS|\bget_nprocs\b|sched_getaffinity"), set()),
]
bad = []
for d, _, files in os.walk(cli):
    for f in sorted(files):
        if not f.endswith((".c", ".h")):
            continue
        path = os.path.join(d, f)
        rel = os.path.relpath(path, root)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            for what, pat, allowed in rules:
                if pat.search(line) and rel not in allowed:
                    bad.append(f"{rel}:{n}: {what}: {line.strip()}")
            if rel == "cli/launch/launch_world.c" and "strtoll" in line:
                bad.append(f"{rel}:{n}: strtoll in launch_world.c (read zinc train's options with its table)")
printed = open(os.path.join(cli, "common", "options.c"), encoding="utf-8").read().count("(default")
if printed != 1:
    bad.append(f"cli/common/options.c: {printed} \"(default\" (want 1: the help printer's one format)")
for b in bad:
    print(b)
print(f"check_cli_defaults: {len(bad)} problem(s)")
sys.exit(1 if bad else 0)
