"""The whole answer catalogue through stock ``nbgrader autograde``: wall time, and whether it agrees.

    python bench/stock_autograde.py

The suite's round trip (tests/grading/test_roundtrip.py) sends a representative few submissions through stock
autograde (the reference with written answers, the untouched release, a correct answer printing a warning, two
correct-variant submissions that tamper with the notebook, one mistake of each function); every catalogued
correct variant and mistake is judged in-process and in the sandbox by other tests.  This runs the same test
file on every submission of the catalogue (RLHF_ROUNDTRIP_WHOLE_CATALOGUE=1: every correct-variant submission,
every mistake, at most one per function in a notebook): every correct variant full marks, every mistake exactly its
cells.  Exit status non-zero if one does not hold.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    [tests] = sorted(REPO.glob("tests/**/test_roundtrip.py"))  # wherever the suite keeps it
    load_before, start = os.getloadavg()[0], time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-q"], cwd=REPO,
                          env=dict(os.environ, RLHF_ROUNDTRIP_WHOLE_CATALOGUE="1"))
    print(f"stock autograde of the whole catalogue, checked: {time.perf_counter() - start:.1f} s, load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after on {os.cpu_count()} cores: "
          + ("every submission scored as the catalogue says" if proc.returncode == 0 else
             f"FAILED (pytest exit status {proc.returncode})"))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
