"""Benchmark of the tiny-LM lab: the whole pipeline from scratch (SFT, reward model, PPO, DPO).

Each configuration runs in its own process (so peak memory is its own), side by side in one run:
the quick and the full setting, with one and with two torch threads.

    python bench/demo.py [--settings quick full] [--threads 1 2]

Targets on the 2-core course machines: quick under 20 s as one process and under 600 MB peak;
full under 60 s.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
from rlhf_course import STUDENT_FUNCTIONS
from rlhf_course.lab.ppo_dpo import run_demo
from rlhf_course.lab.notebook_functions import functions_from_notebook
functions = functions_from_notebook(sys.argv[1], STUDENT_FUNCTIONS)
result = run_demo(**functions, setting=sys.argv[2], threads=int(sys.argv[3]), show_progress=False)
summary = {k: (list(v) if isinstance(v, tuple) else v) for k, v in result.summary().items()}
print(json.dumps({"wall": result.seconds, "cpu": result.cpu_seconds, "summary": summary,
                  "process_seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(setting: str, threads: int) -> dict:
    notebook = REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(notebook), setting, str(threads)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["command_seconds"] = time.perf_counter() - start  # includes interpreter and torch start-up
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=["quick", "full"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    args = parser.parse_args()
    rows = {(s, t): run(s, t) for s in args.settings for t in args.threads}
    stages = list(next(iter(rows.values()))["wall"])
    print(f"{'setting':<8}{'threads':>8}{'process s':>11}{'peak MB':>9}  " +
          "  ".join(f"{s + ' wall/cpu':>18}" for s in stages))
    for (setting, threads), row in rows.items():
        cells = "  ".join(f"{row['wall'][s]:>8.2f} /{row['cpu'][s]:>7.2f}s" for s in stages)
        print(f"{setting:<8}{threads:>8}{row['command_seconds']:>11.1f}{row['peak_mb']:>9.0f}  {cells}")
    for setting in args.settings:
        if len(args.threads) > 1:
            base = rows[(setting, args.threads[0])]["command_seconds"]
            ratios = ", ".join(f"{t} threads {rows[(setting, t)]['command_seconds'] / base:.2f}x"
                               for t in args.threads[1:])
            print(f"{setting}: wall time relative to {args.threads[0]} thread(s): {ratios}")
    for (setting, threads), row in rows.items():
        print(f"\nfinal metrics, {setting}, {threads} thread(s):")
        for key, value in row["summary"].items():
            shown = f"{value[0]:.3f} -> {value[1]:.3f}" if isinstance(value, list) else f"{value:.3f}"
            print(f"  {key:<32} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
