"""The whole answer catalogue through the slow graders: stock ``nbgrader autograde`` and the real sandbox.

    python bench/catalogue.py [--stock-only | --sandbox-only]

The suite sends a representative few of instructor/rlhf_catalogue.py's submissions through stock autograde
(tests/grading/test_roundtrip.py: the reference with written answers, the untouched release, a correct answer
printing a warning, two correct-variant submissions that tamper with the notebook, one mistake of each function)
and through the real sandbox (tests/grading/test_batch.py: one correct-variant submission and one mistake of each
function, with every adversarial submission whose code attacks); every correct variant, every mistake and every
notebook tampered with but answered honestly is judged in-process by other tests (test_hidden_checks.py,
test_pipeline_in_process.py).  This runs those two test files on the whole catalogue (RLHF_WHOLE_CATALOGUE=1: every
correct-variant submission, every mistake, at most one per function in a notebook, every adversarial submission):
every correct variant full marks, every mistake exactly its cells, every attack its state, in both graders.  Prints the wall
time of each; exit status non-zero if one does not hold.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILES = {"stock autograde": "test_roundtrip.py", "real sandbox": "test_batch.py"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--stock-only", action="store_true")
    only.add_argument("--sandbox-only", action="store_true")
    args = parser.parse_args()
    failed = []
    for grader, name in FILES.items():
        if (args.stock_only and grader != "stock autograde") or (args.sandbox_only and grader != "real sandbox"):
            continue
        [tests] = sorted(REPO.glob(f"tests/**/{name}"))  # wherever the suite keeps it
        load_before, start = os.getloadavg()[0], time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-q"], cwd=REPO,
                              env=dict(os.environ, RLHF_WHOLE_CATALOGUE="1"))
        print(f"{grader}, the whole catalogue ({tests.relative_to(REPO)}): {time.perf_counter() - start:.1f} s, load "
              f"average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after on {os.cpu_count()} cores: "
              + ("every submission scored as the catalogue says" if proc.returncode == 0 else
                 f"FAILED (pytest exit status {proc.returncode})"), flush=True)
        if proc.returncode:
            failed.append(grader)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
