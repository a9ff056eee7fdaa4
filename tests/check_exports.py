#!/usr/bin/env python3
"""The shared library exports the public API and nothing else.

    check_exports.py NM LIBZINC.so include/zinc.h zinc.map

Fails (exit 1, naming each symbol) when `nm -D --defined-only` on the library lists a symbol that is not
a function declared in zinc.h (an internal function, a C++ or CUDA runtime symbol), when a function of
zinc.h is not exported, or when the version script zinc.map and the header disagree. Allowed besides:
the symbols the linker itself defines (_init, _fini, _edata, _end, __bss_start): older binutils put some
of them in every shared library's dynamic symbol table whatever the version script says, and no zinc
code can define or call them."""
import re
import subprocess
import sys

LINKER_DEFINED = {"_init", "_fini", "_edata", "_end", "__bss_start"}


def declared(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    types = set(re.findall(r"\b(zinc_\w+)\s*;", text))  # typedef ... zinc_x;  } zinc_x;
    types |= set(re.findall(r"\(\s*\*\s*(zinc_\w+)\s*\)", text))  # function pointer types
    types |= set(re.findall(r"\b(?:enum|struct)\s+(zinc_\w+)", text))
    return set(re.findall(r"\b(zinc_\w+)\s*\(", text)) - types


def in_map(path):
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    return set(re.findall(r"^\s*(zinc_\w+)\s*;", text, flags=re.M))


def main():
    nm, lib, header, vmap = sys.argv[1:5]
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            exported.add(parts[-1].split("@")[0])
    api, listed = declared(header), in_map(vmap)
    problems = []
    if len(api) < 40:
        problems.append(f"only {len(api)} functions found in {header}: the header parser is broken")
    for s in sorted(exported - api - LINKER_DEFINED):
        problems.append(f"exported but not a function of zinc.h: {s}")
    for s in sorted(api - exported):
        problems.append(f"declared in zinc.h but not exported: {s} (add it to zinc.map)")
    for s in sorted(api ^ listed):
        problems.append(f"zinc.map and zinc.h disagree on {s}")
    print(f"{lib}: {len(exported)} dynamic symbols defined, {len(api)} functions in zinc.h, "
          f"{len(listed)} in zinc.map; linker-defined present: {sorted(exported & LINKER_DEFINED)}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
