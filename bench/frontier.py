"""Benchmark of the reward-hacking / frontier study: wall time, CPU time and peak memory.

    python bench/frontier.py [--out results.json] [--check]

--check then judges the fresh sweep (exit status non-zero if any conclusion fails): the conclusions of
the frontier study's tests (tests/test_frontier.py, asserted in the suite on the cached results), with the
same tolerances, and its agreement with the cache within the seed spread - the test file run on these results
(RLHF_FRONTIER_RESULTS names them), so that the conclusions are written once.  The suite runs the command on a
tiny sweep only.

The whole study: SFT, reward model, the bigram reference and its exact frontier (300 values of
beta), then 25 runs (PPO at 5 KL coefficients, GRPO at 3 k3 weights and its KL-in-the-reward variant at 1,
DPO at 3 betas, 2 seeds each, 3 for KL-free PPO)
in two single-threaded worker processes.  Target on the 2-core course machines: under 60 s.

Wall time depends on what else the machine is doing, so the benchmark also prints the load
average and the CPU seconds, and from the CPU seconds of each part what the study takes on two
free cores (set-up, then the runs scheduled on two workers as the sweep submits them).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys
from rlhf_course.lab import frontier
out = sys.argv[1]
frontier.main(["--out", out])
results = json.load(open(out))
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"sweep_seconds": results["seconds"], "runs": len(results["runs"]),
                  "setup_cpu": results["setup_cpu_seconds"], "jobs_cpu": results["jobs_cpu_seconds"],
                  "free_cores": results["free_cores_estimate_seconds"], "workers": results["workers"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_peak_mb": children.ru_maxrss / 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="keep the results here (default: a temporary file)")
    parser.add_argument("--check", action="store_true",
                        help="then assert the study's conclusions on these results (exit status 1 if one fails)")
    args = parser.parse_args()
    import tempfile
    out = args.out or Path(tempfile.mkdtemp()) / "frontier_results.json"
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out)], capture_output=True, text=True, check=True, cwd=REPO)
    total = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    print("\n".join(proc.stdout.strip().splitlines()[:-1]))
    print(f"study: {row['runs']} runs in {row['sweep_seconds']:.1f} s wall (whole command {total:.1f} s with start-up), "
          f"load average {load_before:.1f} before, {load_after:.1f} after on {os.cpu_count()} cores")
    print(f"CPU: set-up {row['setup_cpu']:.1f} s, runs {row['jobs_cpu']:.1f} s; on {row['workers']} free cores about "
          f"{row['free_cores']:.0f} s + start-up; target under 60 s")
    print(f"peak memory: main process {row['peak_mb']:.0f} MB, largest worker {row['worker_peak_mb']:.0f} MB")
    return check(out) if args.check else 0


def check(results: Path) -> int:
    """The frontier tests' conclusions and the agreement with the cache, on ``results`` (pytest's exit status)."""
    [tests] = sorted(REPO.glob("tests/**/test_frontier.py"))  # wherever the suite keeps it
    print(f"checking the conclusions of {tests.relative_to(REPO)} on {results}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-k", "fresh", "-p", "no:cacheprovider", "-q"],
                          cwd=REPO, env=dict(os.environ, RLHF_FRONTIER_RESULTS=str(results.resolve())))
    print("the fresh sweep reaches the study's conclusions" if proc.returncode == 0 else
          f"the fresh sweep does NOT reach the study's conclusions (pytest exit status {proc.returncode})")
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
