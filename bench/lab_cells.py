"""The two labs' training cells as a student runs them, the figures their notebooks state.

    python bench/lab_cells.py [--repeat 3]

Each run is a fresh process calling the notebook's entry point (the rlhf lab's ``run_demo``, the GRPO lab's
``run_lab``) on the reference functions, quick setting, the lab's own thread count, ``OMP_WAIT_POLICY=PASSIVE``
(as ``make lab`` and the hub run it), in two situations:

    trained   no ``RLHF_LAB_CACHE``: the cell trains the SFT policy and the reward model itself
    loaded    ``RLHF_LAB_CACHE`` filled beforehand (``make lab``, the hub): the cell loads them

It prints each stage's wall seconds (the cell's own first line prints the same), the median of ``repeat`` runs,
with bench/host_speed.py's gauge and the load average before and after.  What rests on it: the seconds stated
in ``source/rlhf`` ("Part 4") and ``source/grpo`` (the lab's introduction), in both editions.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

RLHF_CELL = r"""
import json, sys, time
start = time.perf_counter()
from rlhf_course import STUDENT_FUNCTIONS
from rlhf_course.lab.ppo_dpo import run_demo
from rlhf_course.lab.notebook_functions import functions_from_notebook
functions = functions_from_notebook(sys.argv[1] + "/rlhf/rlhf_building_blocks.ipynb", STUDENT_FUNCTIONS)
cell = time.perf_counter()
result = run_demo(**functions, show_progress=False)
print(json.dumps({"stages": result.seconds, "cell": time.perf_counter() - cell}))
"""

GRPO_CELL = r"""
import json, sys, time
from pathlib import Path
from rlhf_course.lab import grpo
from rlhf_course.lab.notebook_functions import functions_from_notebook
folder = Path(sys.argv[1]) / "grpo"
functions = functions_from_notebook(folder / "grpo.ipynb", ("group_relative_advantages",))
others = grpo.find_other_functions(folder)
cell = time.perf_counter()
result = grpo.run_lab(**functions, **others, show_progress=False)
print(json.dumps({"stages": result.seconds, "cell": time.perf_counter() - cell}))
"""

CELLS = {"rlhf": RLHF_CELL, "grpo": GRPO_CELL}


def run_cell(lab: str, cache: Path | None) -> dict:
    """One fresh process running ``lab``'s training cell: {"stages": {name: wall s}, "cell": wall s}."""
    env = {k: v for k, v in os.environ.items() if k != "RLHF_LAB_CACHE"}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    if cache is not None:
        env["RLHF_LAB_CACHE"] = str(cache)
    proc = subprocess.run([sys.executable, "-c", CELLS[lab], str(REPO / "source")], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_run(lab: str, cache: Path | None, repeat: int) -> dict:
    """The median over ``repeat`` runs of each stage's seconds and of the whole cell's."""
    runs = [run_cell(lab, cache) for _ in range(repeat)]
    stages = {name: statistics.median(r["stages"][name] for r in runs) for name in runs[0]["stages"]}
    return {"stages": stages, "cell": statistics.median(r["cell"] for r in runs),
            "cells": [round(r["cell"], 1) for r in runs]}


def main() -> int:
    import host_speed
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--labs", nargs="+", default=list(CELLS), choices=list(CELLS))
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"host speed {host_speed.measure()[1]:.2f}x the reference hour's")
    with tempfile.TemporaryDirectory(prefix="bench-lab-cache-") as cache:
        for lab in args.labs:
            run_cell(lab, Path(cache))  # fills the cache with this lab's thread count (not timed)
            for situation, folder in (("trained", None), ("loaded", Path(cache))):
                row = median_run(lab, folder, args.repeat)
                stages = ", ".join(f"{name} {seconds:.1f}" for name, seconds in row["stages"].items())
                print(f"{lab:<5} {situation:<8} cell {row['cell']:5.1f} s (runs {row['cells']}): {stages}")
    print(f"load average {os.getloadavg()[0]:.2f} after; "
          f"host speed {host_speed.measure()[1]:.2f}x the reference hour's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
