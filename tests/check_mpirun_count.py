#!/usr/bin/env python3
"""The tests under mpirun (label `mpi`) do not grow unnoticed: their count must not exceed the number that
tests/README.md writes on its line "Tests under mpirun: N" (the full suite's time on 2 cores grows with each).

    check_mpirun_count.py CTEST BUILD_DIR README"""
import re
import subprocess
import sys


def main():
    ctest, build, readme = sys.argv[1:4]
    out = subprocess.run([ctest, "--test-dir", build, "-N", "-L", "^mpi$"], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"Total Tests: (\d+)", out)
    w = re.search(r"Tests under mpirun: (\d+)", open(readme, encoding="utf-8").read())
    if not m or not w:
        print(f"cannot read the count ({'ctest -N' if not m else readme + ': no line Tests under mpirun: N'})")
        return 1
    have, written = int(m.group(1)), int(w.group(1))
    print(f"{have} tests under mpirun; {readme} allows {written}")
    if have > written:
        print(f"{have - written} more than {readme} says: make the test cheaper (one rank, or fold it into an "
              f"existing multi-rank test), or raise the number there with the full suite's new time")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
