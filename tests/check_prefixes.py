#!/usr/bin/env python3
"""The `zinc_` / `ZINC_` prefix belongs to the public API (include/zinc.h) alone (HACKING.md, "Prefixes").

    check_prefixes.py ROOT [NM [--library ARCHIVE] BINARY...]

Fails (exit 1, naming each name and where it is defined) when code outside include/ defines a name with the
prefix that zinc.h does not declare:
  - in the sources (every .c, .h, .cu under the library's folders, cli/, examples/, tests/, bench/):
    a function defined, a typedef, a struct/enum/union tag, an enum constant or a macro; include guards
    (ZINC_..._H) are allowed;
  - in the linked objects (each BINARY: the zinc program, the example libraries), through `nm
    --defined-only`: a global symbol zinc_* that is not a function of zinc.h.
  - in the library (ARCHIVE, libzinc_internal.a): a global symbol whose prefix (up to its first "_") is not
    in the first column of HACKING.md's prefix table.
So the CLI's own functions take `zcli_`, the examples theirs (`mlp_`, `gpt2_`), and a helper that grows the
public prefix by mistake is found before it looks like API."""
import os
import re
import subprocess
import sys

# Library-internal names that still carry the public prefix, each kept on purpose until its owner renames it:
# the typed config (base/config/config.h, used throughout the library) and the error recorder's entry points
# that the ZERR/TRY macros expand to (base/core/error.h). Nothing else may be added here.
KNOWN = {"zinc_config", "zinc__error_trace", "zinc__error_clear", "ZINC_ERROR_CAP"}
FOLDERS = ("base", "runtime", "zero", "offload", "amp", "kernels", "cli", "examples", "tests", "bench")
EXT = (".c", ".h", ".cu", ".cuh", ".inc")


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def public_names(header):
    text = strip(open(header).read())
    return set(re.findall(r"\b((?:zinc|ZINC)_\w+)", text))


DEFS = [
    ("function", re.compile(r"^(?![ \t#])[^;\n]*?\b(zinc_\w+)\s*\([^;{]*?\)\s*\{", re.M | re.S)),
    ("typedef", re.compile(r"\btypedef\b[^;]*?\b(zinc_\w+)\s*;")),
    ("typedef", re.compile(r"^\}\s*(zinc_\w+)\s*;", re.M)),
    ("tag", re.compile(r"\b(?:struct|enum|union)\s+(zinc_\w+)\s*\{")),
    ("macro", re.compile(r"^\s*#\s*define\s+((?:zinc|ZINC)_\w+)", re.M)),
    ("enum constant", re.compile(r"^\s+(ZINC_\w+)\s*(?:=[^,\n]*)?,?\s*$", re.M)),
]


def source_problems(root, public):
    problems, seen = [], 0
    for top in FOLDERS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(EXT):
                    continue
                path = os.path.join(d, f)
                text = strip(open(path, encoding="utf-8", errors="replace").read())
                seen += 1
                for kind, rx in DEFS:
                    for m in rx.finditer(text):
                        name = m.group(1)
                        if name in public or (kind == "macro" and name.endswith("_H")):
                            continue
                        line = text.count("\n", 0, m.start(1)) + 1
                        rel = os.path.relpath(path, root)
                        problems.append(f"{rel}:{line}: {kind} {name} takes the public prefix but is not in "
                                        f"include/zinc.h: give it its folder's prefix (HACKING.md, Prefixes)")
    return seen, problems


def binary_problems(nm, binaries, public):
    problems = []
    for b in binaries:
        out = subprocess.run([nm, "--defined-only", b], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 3 or parts[1] not in "TDBRVW":  # global text, data, bss, read-only, weak
                continue
            name = parts[2]
            if name.startswith("zinc_") and name not in public:
                problems.append(f"{b}: defines the global symbol {name}, which include/zinc.h does not declare")
    return problems


def table_prefixes(hacking):
    """The backticked names in the first column of HACKING.md's table under "## Prefixes"."""
    text = open(hacking, encoding="utf-8").read()
    part = text.split("## Prefixes", 1)[1].split("\n## ", 1)[0]
    found = set()
    for line in part.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            found.update(re.findall(r"`([A-Za-z0-9_]+)`", line.split("|")[1]))
    return found


def library_problems(nm, archive, prefixes):
    problems = []
    out = subprocess.run([nm, "--defined-only", archive], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in "TDBRVW" or parts[2].startswith(("_", "DW.")):
            continue  # local symbols, C++ mangled names (the .cu files' anonymous namespaces), EH data
        name = parts[2]
        if not any(name.startswith(p) or name == p.rstrip("_") for p in prefixes):
            problems.append(f"{archive}: the global symbol {name} has a prefix that HACKING.md's prefix table "
                            f"does not list: add its row there (one prefix per subsystem) or rename it")
    return problems


def main():
    root = sys.argv[1]
    args = sys.argv[2:]
    archive = None
    if len(args) > 2 and args[1] == "--library":
        archive = args[2]
        del args[1:3]
    public = public_names(os.path.join(root, "include", "zinc.h")) | KNOWN
    seen, problems = source_problems(root, public)
    if len(args) > 1:
        problems += binary_problems(args[0], args[1:], public)
    if archive:
        prefixes = table_prefixes(os.path.join(root, "HACKING.md"))
        if len(prefixes) < 20:
            problems.append("too few prefixes read from HACKING.md's table: the checker is broken")
        problems += library_problems(args[0], archive, prefixes)
    print(f"{seen} source files and {max(0, len(args) - 1)} binaries checked against {len(public)} public "
          f"names{'; the library against HACKING.md' if archive else ''}")
    if seen < 50 or len(public) < 50:
        problems.append("too few files or public names found: the checker is broken")
    for p in sorted(set(problems)):
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
