"""What two labs training side by side cost each other on this machine: the `--pair-factor` of
bench/training_bound.py.

    python bench/training_pair.py [--repeats 3] [--setting quick]

The students' training cell as the hub runs it (one torch thread, OMP_WAIT_POLICY=PASSIVE, the SFT policy and
reward model from the class's cache, trained here first into a temporary folder), in fresh processes: one alone,
then two started together, ``--repeats`` times, alternating.  Prints each one's wall seconds and the pair's over
alone (medians).  Run it with nothing else on the machine (the load average is printed beside).
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

CHILD = r"""
import json, sys, time
from rlhf_course import STUDENT_FUNCTIONS
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab.ppo_dpo import run_demo
functions = functions_from_notebook(sys.argv[1], STUDENT_FUNCTIONS)
if sys.argv[3] == "fill":  # the class's cache, as make hub fills it
    from rlhf_course.lab import train
    from rlhf_course.lab.shared_stages import sft_and_reward_model
    sft_and_reward_model(train.LabConfig.setting(sys.argv[2]), show_progress=False)
    raise SystemExit
sys.stdin.readline()  # started together: both wait for the parent's go
start = time.perf_counter()
result = run_demo(**functions, setting=sys.argv[2], threads=1, show_progress=False)
print(json.dumps({"wall": time.perf_counter() - start, "cpu": sum(result.cpu_seconds.values())}))
"""


def trainings(count: int, setting: str, env: dict) -> list[dict]:
    """``count`` training cells started at the same moment; each one's wall and CPU seconds."""
    notebook = REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    processes = [subprocess.Popen([sys.executable, "-c", CHILD, str(notebook), setting, "run"], cwd=REPO, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for process in processes:  # after every import: only the training is timed side by side
        process.stdin.write("go\n")
        process.stdin.flush()
    rows = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode:
            raise SystemExit(f"a training failed ({process.returncode})")
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setting", default="quick")
    args = parser.parse_args(argv)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="training-pair-") as cache:
        env = {**os.environ, "RLHF_LAB_CACHE": cache, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        subprocess.run([sys.executable, "-c", CHILD, str(REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"),
                        args.setting, "fill"], cwd=REPO, env=env, check=True)
        alone, paired = [], []
        for _ in range(args.repeats):
            alone += [r["wall"] for r in trainings(1, args.setting, env)]
            paired += [r["wall"] for r in trainings(2, args.setting, env)]
    a, p = statistics.median(alone), statistics.median(paired)
    print(f"alone: {' '.join(f'{x:.2f}' for x in alone)} s (median {a:.2f})")
    print(f"two at once: {' '.join(f'{x:.2f}' for x in paired)} s (median {p:.2f})")
    print(f"pair factor (two at once over alone): {p / a:.2f}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
