#!/usr/bin/env python3
"""The engine's files as a call graph, from the sources: runtime/engine has floors, and its roof only calls down.

A file of runtime/engine calls another when it names a function (called, or taken as a pointer) that the
other defines with external linkage. This script fails when
  - that file graph has a cycle (a file below an entry point calling back up into it): each cycle is
    printed, its files in order;
  - `zinc_step` (the step's entry point) names an observer: the trace, monitor, comms logger, FLOPs or
    wall-clock hooks (`zengine_trace_`, `zengine_monitor_`, `zengine_comms_`, `zengine_flops_`,
    `zengine_wc_`, `ztrace_`), which the observer table (engine_observe.c) calls;
  - `lamb` (any case) appears in runtime/engine or runtime/mem outside a comment: the plan and the step pass
    are generic, the optimizer's own names live in runtime/optim.

  scripts/check_engine_graph.py [ROOT]          check; prints each file's callees, lowest floor first
  scripts/check_engine_graph.py --dot [ROOT]    the file graph in Graphviz dot
  scripts/check_engine_graph.py --self-test     plants a back-call and a name in a copy: the check must fail
"""
import os
import re
import shutil
import sys
import tempfile

ENGINE = "runtime/engine"
NO_OPTIMIZER_NAMES = ("runtime/engine", "runtime/mem")
OBSERVER = re.compile(r"\b(zengine_(trace|monitor|comms|flops|wc)_\w+|ztrace_\w+)\b")
# a definition with external linkage: column 0, not static, a name and "(", the body's "{" on that line or
# a following one (clang-format puts it at the end of the signature)
DEFINITION = re.compile(r"^(?!static\b|typedef\b|#|[ \t/}])[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(", re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def strip(text, keep_strings=False):
    """text with comments blanked and (unless keep_strings) string and character literals emptied, so that
    what is left is code; newlines are kept (line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1] if keep_strings else c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def definitions(code):
    """Names of the functions code defines with external linkage."""
    names = set()
    for m in DEFINITION.finditer(code):
        rest = code[m.end():]
        depth, k = 1, 0
        while k < len(rest) and depth:  # past the parameter list
            depth += {"(": 1, ")": -1}.get(rest[k], 0)
            k += 1
        tail = rest[k:k + 200].lstrip()
        if tail.startswith("{"):
            names.add(m.group(1))
    # variables with external linkage (an observer's descriptor: const zengine_observer zengine_observer_trace = ...)
    for m in re.finditer(r"^(?!static\b|typedef\b|extern\b)(?:const\s+)?[A-Za-z_]\w*\s+\**(\w+)\s*(?:\[[^\]]*\])?\s*=",
                         code, re.M):
        names.add(m.group(1))
    # the accessors' macro (engine.c: ACCESS(type, name, none, expr) defines name)
    for m in re.finditer(r"^ACCESS\([^,]+,\s*(\w+)\s*,", code, re.M):
        names.add(m.group(1))
    return names


def engine_files(root):
    d = os.path.join(root, ENGINE)
    return sorted(f for f in os.listdir(d) if f.endswith(".c"))


def graph(root):
    code = {f: strip(open(os.path.join(root, ENGINE, f), encoding="utf-8").read()) for f in engine_files(root)}
    owner = {}
    for f, c in code.items():
        for name in definitions(c):
            owner[name] = f
    edges = {f: {} for f in code}
    for f, c in code.items():
        for m in IDENT.finditer(c):
            g = owner.get(m.group(0))
            if g and g != f:
                edges[f].setdefault(g, set()).add(m.group(0))
    return code, edges


def cycles(edges):
    """The strongly connected components of more than one file (Tarjan), each in a cycle's order."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return comps


def cycle_path(edges, comp):
    """One cycle through the component's first file, as a list of files (first repeated at the end)."""
    members, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def floors(edges):
    """Each file's floor: 0 calls no engine file, else 1 + the highest floor it calls (acyclic graphs)."""
    floor = {}

    def f(v, seen=()):
        if v in floor:
            return floor[v]
        if v in seen:
            return 0
        floor[v] = 0 if not edges[v] else 1 + max(f(w, seen + (v,)) for w in edges[v])
        return floor[v]

    for v in edges:
        f(v)
    return floor


def function_body(code, name):
    m = re.search(r"^\w[\w \t\*]*\b" + name + r"\s*\([^)]*\)\s*\{", code, re.M)
    if not m:
        return None
    depth, k = 1, m.end()
    while k < len(code) and depth:
        depth += {"{": 1, "}": -1}.get(code[k], 0)
        k += 1
    return code[m.end():k]


def lamb_outside_comments(root):
    """Lines of runtime/engine and runtime/mem naming LAMB in code or a string (a message naming the
    optimizer belongs to its descriptor); comments may."""
    found = []
    for folder in NO_OPTIMIZER_NAMES:
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if not name.endswith((".c", ".h")):
                continue
            text = open(os.path.join(root, folder, name), encoding="utf-8").read()
            raw = text.split("\n")
            for i, line in enumerate(strip(text, keep_strings=True).split("\n")):
                if re.search(r"lamb", line, re.I):
                    found.append(f"{folder}/{name}:{i + 1}: {raw[i].strip()}")
    return found


def check(root):
    code, edges = graph(root)
    problems = []
    for comp in cycles(edges):
        path = cycle_path(edges, comp)
        steps = []
        for a, b in zip(path, path[1:]):
            steps.append(f"{a} -> {b} ({', '.join(sorted(edges[a].get(b, ()))[:3])})")
        problems.append(f"a cycle of {len(comp)} files in {ENGINE}: " + "; ".join(steps))
    body = function_body(code.get("engine.c", ""), "zinc_step")
    if body is None:
        problems.append(f"{ENGINE}/engine.c: zinc_step not found")
    else:
        named = sorted(set(m.group(1) for m in OBSERVER.finditer(body)))
        if named:
            problems.append(f"{ENGINE}/engine.c: zinc_step names observers ({', '.join(named)}): walk the "
                            "observer table (engine_observe.c) instead")
    for hit in lamb_outside_comments(root):
        problems.append(f"{hit}: an optimizer's name outside a comment (runtime/optim's descriptor says it)")
    return edges, problems


def self_test():
    """The copy as it is must pass; a planted back-call from the lowest file and a planted name must fail."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with tempfile.TemporaryDirectory() as tmp:
        for folder in (ENGINE, "runtime/mem"):
            shutil.copytree(os.path.join(here, folder), os.path.join(tmp, folder))
        edges, problems = check(tmp)
        if problems:
            print("check_engine_graph --self-test: the unchanged copy already fails", file=sys.stderr)
            return 1
        floor = floors(edges)
        low = min(sorted(edges), key=lambda f: floor[f])
        with open(os.path.join(tmp, ENGINE, low), "a", encoding="utf-8") as out:
            out.write("\nvoid zengine_planted_back_call(void) { zinc_step(0, 0); }\n")
        with open(os.path.join(tmp, "runtime/mem/plan.c"), "a", encoding="utf-8") as out:
            out.write("\nstatic const int planted_lamb_size = 1; /* lamb in a comment is fine */\n")
        _, problems = check(tmp)
        if not any("cycle" in p and low in p and "engine.c" in p for p in problems):
            print(f"check_engine_graph --self-test: a call from {low} (floor 0) to zinc_step made no cycle",
                  file=sys.stderr)
            return 1
        if not any("plan.c" in p and "planted_lamb_size" in p for p in problems):
            print("check_engine_graph --self-test: a planted name in runtime/mem/plan.c was not found",
                  file=sys.stderr)
            return 1
    print("check_engine_graph --self-test: the planted back-call and name are refused")
    return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    dot = argv[1:2] == ["--dot"]
    rest = argv[2:] if dot else argv[1:]
    root = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    edges, problems = check(root)
    if dot:
        print("digraph engine {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    floor = floors(edges)
    for f in sorted(edges, key=lambda f: (floor[f], f)):
        print(f"{floor[f]:2d} {f}: {' '.join(sorted(edges[f])) or '-'}")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(cycles(edges))} cycles in {ENGINE}; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
