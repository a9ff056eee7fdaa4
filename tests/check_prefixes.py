#!/usr/bin/env python3
"""The `zinc_` / `ZINC_` prefix belongs to the public API (include/zinc.h) alone (HACKING.md, "Prefixes").

    check_prefixes.py ROOT [NM BINARY...]

Fails (exit 1, naming each name and where it is defined) when code outside include/ defines a name with the
prefix that zinc.h does not declare:
  - in the sources (every .c, .h, .cu under the library's folders, cli/, examples/, tests/, bench/):
    a function defined, a typedef, a struct/enum/union tag, an enum constant or a macro; include guards
    (ZINC_..._H) are allowed;
  - in the linked objects (each BINARY: the zinc program, the example libraries), through `nm
    --defined-only`: a global symbol zinc_* that is not a function of zinc.h.
So the CLI's own functions take `zcli_`, the examples theirs (`mlp_`, `gpt2_`), and a helper that grows the
public prefix by mistake is found before it looks like API."""
import os
import re
import subprocess
import sys

# Library-internal names that still carry the public prefix, each kept on purpose until its owner renames it:
# the typed config (runtime/config/config.h, used throughout the library) and the error recorder's entry points
# that the ZERR/TRY macros expand to (runtime/core/error.h). Nothing else may be added here.
KNOWN = {"zinc_config", "zinc__error_trace", "zinc__error_clear", "ZINC_ERROR_CAP"}
FOLDERS = ("runtime", "zero", "offload", "amp", "kernels", "cli", "examples", "tests", "bench")
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


def main():
    root = sys.argv[1]
    public = public_names(os.path.join(root, "include", "zinc.h")) | KNOWN
    seen, problems = source_problems(root, public)
    if len(sys.argv) > 3:
        problems += binary_problems(sys.argv[2], sys.argv[3:], public)
    print(f"{seen} source files and {max(0, len(sys.argv) - 3)} binaries checked against {len(public)} public "
          f"names")
    if seen < 50 or len(public) < 50:
        problems.append("too few files or public names found: the checker is broken")
    for p in sorted(set(problems)):
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
