"""Benchmark of the reward-hacking / frontier sweep: wall time and peak memory, one process.

    python bench/frontier.py

Target on the 2-core course machines: the default sweep (5 PPO KL coefficients and 3 DPO betas,
two seeds each, from one SFT policy and reward model) under 60 s.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, tempfile
from rlhf_course import frontier
out = tempfile.mktemp(suffix=".json")
frontier.main(["--out", out])
results = json.load(open(out))
print(json.dumps({"sweep_seconds": results["seconds"], "runs": len(results["runs"]),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

start = time.perf_counter()
proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, cwd=REPO)
total = time.perf_counter() - start
row = json.loads(proc.stdout.strip().splitlines()[-1])
print("\n".join(proc.stdout.strip().splitlines()[:-1]))
print(f"sweep: {row['runs']} runs in {row['sweep_seconds']:.1f} s (whole command {total:.1f} s "
      f"with start-up); peak memory {row['peak_mb']:.0f} MB; target under 60 s")
