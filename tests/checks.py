"""The Python tests' one check: prints each failed promise and counts them (`checks.failures`), so a test
reports every failure of a run, not only the first."""
failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg, flush=True)
    return cond
