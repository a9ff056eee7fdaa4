"""Finding the processes a test started: every descendant of a pid, from /proc's parent links (the ranks
under mpirun, srun or zinc launch)."""
import glob


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
