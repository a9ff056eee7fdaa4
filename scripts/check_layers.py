#!/usr/bin/env python3
"""The library's folders and what each may include, stated here only (LAYERS below), checked from the sources.

HACKING.md, the folder READMEs and the headers point here instead of repeating the list; print it with
--table.

Every `#include "..."` in the library names its folder from the source root (or is the public "zinc.h").
This script reads them all and fails when
  - an include does not name its folder (a bare "error.h" from another folder would hide a dependency),
  - a folder includes one that its layer does not allow (LAYERS below, lowest first),
  - the folder graph has a cycle (impossible while LAYERS is obeyed; checked anyway),
  - an example (examples/) includes anything but the public "zinc.h" and files of examples/ (HACKING.md:
    the examples use the public API only; their includes are relative to their own folder).
(That getenv is called only in base/core/env.c is the test env_getenv_one_place.)

  scripts/check_layers.py [ROOT]          check; prints the folder graph
  scripts/check_layers.py --dot [ROOT]    the folder graph in Graphviz dot (for a drawing)
  scripts/check_layers.py --table         LAYERS as a Markdown table (folder, may include)
  scripts/check_layers.py --self-test     plants a bad include in a copy of the tree: the check must fail
"""
import os
import re
import shutil
import sys
import tempfile

# Folder -> folders it may include (besides itself and include/zinc.h). Lowest layer first.
LAYERS = {
    "base/core": [],
    "kernels": ["base/core"],
    "amp": ["base/core"],
    "base/config": ["base/core"],
    "base/comm": ["base/core"],
    "base/device": ["base/core", "base/comm", "kernels"],
    "runtime/optim": ["base/core", "base/config", "base/comm", "base/device", "kernels"],
    "zero": ["base/core", "base/config", "base/comm", "base/device", "kernels"],
    "offload": ["base/core", "base/config", "base/comm", "base/device", "kernels"],
    "runtime/mem": ["base/core", "base/config", "base/comm", "base/device", "kernels", "zero",
                    "offload", "runtime/optim"],
    # DeepSpeed's tensorboard and csv_monitor: files of scalars the engine hands over (no engine inside)
    "runtime/monitor": ["base/core", "base/config"],
    "runtime/engine": ["base/core", "base/config", "base/comm", "base/device", "kernels", "amp",
                       "zero", "offload", "runtime/mem", "runtime/optim", "runtime/monitor"],
    "runtime/checkpoint": ["base/core", "base/config", "base/comm", "base/device", "kernels", "amp",
                           "zero", "offload", "runtime/mem", "runtime/engine", "runtime/optim"],
    # the zinc program drives the example models (examples/mlp, examples/gpt2) through the engine API: its
    # floor (cli/common: the option parser, output files, plots), the rooms, and cli/ top (main.c) the roof
    "cli/common": ["base/core"],
    "cli/checkpoint": ["base/core", "runtime/checkpoint", "examples", "cli/common"],
    "cli/trace": ["base/core", "cli/common"],
    "cli/train": ["base/core", "base/config", "runtime/checkpoint", "examples", "cli/common", "cli/checkpoint",
                  "cli/trace"],
    "cli/mem": ["base/core", "base/config", "kernels", "runtime/mem", "runtime/engine", "cli/common", "cli/train"],
    "cli/launch": ["base/core", "base/config", "runtime/checkpoint", "cli/common", "cli/train"],
    "cli": ["base/core", "base/config", "runtime/engine", "cli/common", "cli/train"],
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".inc")


def folder_of(path):
    parts = path.split("/")
    if parts[0] in ("base", "runtime") or (parts[0] == "cli" and len(parts) > 2):
        return "/".join(parts[:2])
    return parts[0]


def generated(root, inc):
    """A header the build generates from a source beside it (protoc-c: NAME.proto -> NAME.pb-c.h)."""
    return inc.endswith(".pb-c.h") and os.path.exists(os.path.join(root, inc[: -len(".pb-c.h")] + ".proto"))


def scan(root):
    edges, problems = {}, []
    include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for top in ("base", "runtime", "zero", "offload", "amp", "kernels", "cli"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                here = folder_of(path)
                text = open(os.path.join(root, path), encoding="utf-8").read()
                for m in include_re.finditer(text):
                    inc = m.group(1)
                    if inc == "zinc.h":
                        continue
                    if "/" not in inc or not (os.path.exists(os.path.join(root, inc)) or generated(root, inc)):
                        problems.append(f'{path}: #include "{inc}" does not name its folder from the source root')
                        continue
                    there = folder_of(inc)
                    if there == here:
                        continue
                    edges.setdefault(here, {}).setdefault(there, path)
                    if here not in LAYERS:
                        problems.append(f"{path}: folder {here} has no layer in scripts/check_layers.py")
                    elif there not in LAYERS[here]:
                        problems.append(f'{path}: #include "{inc}": {here} may not include {there} '
                                        f"(allowed: {', '.join(LAYERS[here]) or 'nothing'})")
    return edges, problems


def scan_examples(root):
    """The examples' boundary: "zinc.h" or a file of examples/ named from the including file's folder."""
    problems = []
    include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    top = os.path.realpath(os.path.join(root, "examples"))
    for dirpath, _, files in os.walk(top):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            full = os.path.join(dirpath, name)
            path = os.path.relpath(full, os.path.realpath(root))
            for m in include_re.finditer(open(full, encoding="utf-8").read()):
                inc = m.group(1)
                there = os.path.realpath(os.path.join(dirpath, inc))
                if inc == "zinc.h" or (there.startswith(top + os.sep) and os.path.exists(there)):
                    continue
                problems.append(f'{path}: #include "{inc}": an example includes only "zinc.h" (the public API) and '
                                "files of examples/ named from its own folder")
    return problems


def self_test():
    """A copy of the tree's sources with one example including runtime/ must fail; the copy as it is must pass."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with tempfile.TemporaryDirectory() as tmp:
        for top in ("base", "runtime", "zero", "offload", "amp", "kernels", "cli", "examples", "include"):
            shutil.copytree(os.path.join(here, top), os.path.join(tmp, top),
                            ignore=shutil.ignore_patterns("*.o", "*.a", "*.so"))
        if scan_examples(tmp) or scan(tmp)[1]:
            print("check_layers --self-test: the unchanged copy already fails", file=sys.stderr)
            return 1
        victim = os.path.join(tmp, "examples", "mlp", "mlp.c")
        text = open(victim, encoding="utf-8").read()
        open(victim, "w", encoding="utf-8").write('#include "base/core/error.h"\n' + text)
        found = scan_examples(tmp)
        if not any('mlp.c: #include "base/core/error.h"' in p for p in found):
            print("check_layers --self-test: a planted runtime/ include in examples/mlp/mlp.c was not found",
                  file=sys.stderr)
            return 1
    print("check_layers --self-test: the planted include is refused")
    return 0


def find_cycle(edges):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, {})):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def main(argv):
    if "--table" in argv:
        print("| folder | may include (besides itself and include/zinc.h) |\n|---|---|")
        for folder, allowed in LAYERS.items():
            print(f"| `{folder}` | {', '.join(f'`{a}`' for a in allowed) or 'nothing'} |")
        return 0
    if "--self-test" in argv:
        return self_test()
    dot = "--dot" in argv
    args = [a for a in argv if a != "--dot"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    edges, problems = scan(root)
    problems += scan_examples(root)
    if dot:
        print("digraph zinc_folders {\n  rankdir=BT;")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    for a in sorted(edges):
        print(f"{a} -> {', '.join(sorted(edges[a]))}")
    cycle = find_cycle(edges)
    if cycle:
        problems.append("folder cycle: " + " -> ".join(cycle) + " (e.g. " +
                        "; ".join(edges[a][b] for a, b in zip(cycle, cycle[1:])) + ")")
    for p in problems:
        print("check_layers: " + p, file=sys.stderr)
    print(f"check_layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
