"""Finding the processes a test started: every descendant of a pid, from /proc's parent links (the ranks
under mpirun, srun or zinc launch)."""
import glob
import os


def children(pid):
    """Every descendant of pid (by /proc's parent links)."""
    kids = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(st) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(st.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def rank_pids(pid, zinc):
    """{rank: pid} of the zinc processes (the executable zinc) below pid, by OMPI_COMM_WORLD_RANK."""
    exe = os.path.realpath(zinc)
    found = {}
    for c in children(pid):
        try:
            if os.path.realpath("/proc/%d/exe" % c) != exe:
                continue
            with open("/proc/%d/environ" % c, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            found[int(env[b"OMPI_COMM_WORLD_RANK"])] = c
        except (OSError, KeyError, ValueError):
            pass
    return found
