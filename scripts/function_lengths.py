#!/usr/bin/env python3
"""The length of every function in C sources formatted by clang-format (.clang-format): from the first line
of its signature to its closing brace, both counted.

  scripts/function_lengths.py [--max N] [--allow FILE] [--top K] FILE_OR_DIR...

Prints the K longest (default 10), longest first, as LINES FILE:LINE NAME. With --max N it fails (exit 1)
naming each function longer than N lines: the ctest `cli_function_length` holds cli/ to the limit
HACKING.md gives for it, `library_function_length` the library's folders to theirs.
--allow FILE names functions still over the limit, one `FILE_NAME FUNCTION` a line (the file's name
without its folder, so a move keeps the row; `#` starts a comment). The list can only shrink: a listed
function that is now within the limit, or gone, fails too, until its row is deleted."""
import argparse
import os
import re
import sys

# A definition starts at column 0 with a return type and a name followed by "(", not a declaration (";"),
# and its body ends at the first "}" in column 0.
START = re.compile(r"^(?![#/ \t}]|typedef|struct\s+\w+\s*\{|enum|union)[^;=]*?\b(\w+)\s*\(")


def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = START.match(lines[i])
        if not m:
            i += 1
            continue
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", "}")):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";") or lines[j].rstrip().endswith("= {"):
            i = j + 1
            continue
        if lines[j].rstrip().endswith("}"):  # a one-line function
            yield m.group(1), i + 1, 1
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != "}":
            k += 1
        yield m.group(1), i + 1, k - i + 1
        i = k + 1


def sources(args):
    for a in args:
        if os.path.isdir(a):
            for d, _, files in sorted(os.walk(a)):
                for f in sorted(files):
                    if f.endswith((".c", ".h", ".cu", ".inc")):
                        yield os.path.join(d, f)
        else:
            yield a


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max", type=int, default=0)
    ap.add_argument("--allow", default=None)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    found = sorted(((n, f"{p}:{line}", name) for p in sources(a.paths) for name, line, n in functions(p)),
                   reverse=True)
    if not found:
        print("no functions found: the parser is broken")
        return 1
    for n, where, name in found[: a.top]:
        print(f"{n:5d} {where} {name}")
    allowed = read_allow(a.allow) if a.allow else set()
    over = [f for f in found if a.max and f[0] > a.max]
    bad = 0
    for n, where, name in over:
        if (os.path.basename(where.rsplit(":", 1)[0]), name) in allowed:
            print(f"allowed: {name} ({where}) has {n} lines (listed in {a.allow}; split it and delete its row)")
            continue
        print(f"too long: {name} ({where}) has {n} lines, the limit is {a.max}: split it")
        bad += 1
    still = {(os.path.basename(w.rsplit(":", 1)[0]), name) for n, w, name in over}
    for f, name in sorted(allowed - still):
        print(f"{a.allow}: {f} {name} is no longer over {a.max} lines (or is gone): delete its row, the list "
              f"only shrinks")
        bad += 1
    return 1 if bad else 0


def read_allow(path):
    rows = set()
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].split()
        if line:
            rows.add((line[0], line[1]))
    return rows


if __name__ == "__main__":
    sys.exit(main())
