"""The hub's levers, measured without a hub: N students' processes side by side, each in a cgroup of its own
with the hub's CPU quota (rlhf_course/classroom/spawner.py's UserCgroup, 1 core by default), as `make hub`
runs them.  Needs root (cgroups).

    sudo .venv/bin/python bench/hubload.py --students 1 4 --variants before after [--what setup lab]

* ``setup``: the set-up cell's import (``import torch``) and the explorers' imports, in fresh processes;
* ``lab``: the training cell (the PPO/DPO lab, quick setting) with the solution's functions.

Variants: ``before``: what the hub ran before #37 (two torch threads, from the machine's core count, OpenMP's
default wait policy); ``after``: what the spawner now gives every server (OMP_NUM_THREADS from the quota,
OMP_WAIT_POLICY=PASSIVE) and the lab's own thread choice (rlhf_course/lab/threads.py); ``cached``: ``after`` with
the SFT policy and reward model loaded from a cache filled once (rlhf_course/lab/shared_stages.py, as make hub
does).  Prints one JSON line
per run and a table; the load average is printed before and after (other work on the machine counts).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rlhf_course.classroom.spawner import UserCgroup, thread_environment  # noqa: E402

LAB_CACHE = Path("/tmp/rlhf-bench-hubload-lab-cache")

SETUP = r"""
import json, time
start = time.perf_counter()
import torch
torch_seconds = time.perf_counter() - start
from rlhf_course import explorers
import ipywidgets, matplotlib.pyplot
print(json.dumps({"import_torch": torch_seconds, "setup_and_explorers": time.perf_counter() - start,
                  "threads": torch.get_num_threads()}))
"""

LAB = r"""
import json, sys, time
start = time.perf_counter()
import torch
from rlhf_course import STUDENT_FUNCTIONS
from rlhf_course.lab.ppo_dpo import run_demo
from rlhf_course.lab.notebook_functions import functions_from_notebook
functions = functions_from_notebook(sys.argv[1], STUDENT_FUNCTIONS)
begin = time.perf_counter()
result = run_demo(**functions, setting="quick", show_progress=False)
print(json.dumps({"lab": time.perf_counter() - begin, "stages": result.seconds, "threads": torch.get_num_threads(),
                  "dpo_margin": result.dpo_history[-1]["implicit_reward_margin"]}))
"""


def environment(variant: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "RLHF_LAB_", "MKL_"))}
    env["PYTHONPATH"] = str(REPO)
    if variant == "before":
        env["RLHF_LAB_THREADS"] = str(min(2, os.cpu_count() or 1))  # the lab's old choice: the machine's cores
    else:
        env.update(thread_environment(1.0))
    if variant == "cached":  # and the SFT policy and reward model from the class's cache, as make hub fills it
        env["RLHF_LAB_CACHE"] = str(LAB_CACHE)
    return env


def run_side_by_side(what: str, students: int, variant: str, cpus: float) -> list[dict]:
    code = SETUP if what == "setup" else LAB
    notebook = REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    procs = []
    for number in range(students):
        procs_file = UserCgroup(f"bench-{os.getpid()}-{number}").prepare(None, cpus, None)

        def enter(procs_file=procs_file):
            for path in procs_file:
                Path(path).write_text(str(os.getpid()))
        procs.append(subprocess.Popen([sys.executable, "-c", code, str(notebook)], env=environment(variant),
                                      stdout=subprocess.PIPE, text=True, preexec_fn=enter))
    results = [json.loads(p.communicate()[0].splitlines()[-1]) for p in procs]
    for number in range(students):
        UserCgroup(f"bench-{os.getpid()}-{number}").remove()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--variants", nargs="+", default=["before", "after", "cached"],
                        choices=["before", "after", "cached"])
    parser.add_argument("--what", nargs="+", default=["setup", "lab"], choices=["setup", "lab"])
    parser.add_argument("--cpus", type=float, default=1.0, help="each student's CPU quota (the hub's HUB_CPUS)")
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()} ({os.cpu_count()} cores)", flush=True)
    if "cached" in args.variants and "lab" in args.what:  # filled once, for one thread (the hub's quota)
        subprocess.run([sys.executable, "-m", "rlhf_course.lab.shared_stages", str(LAB_CACHE), "--threads", "1"],
                       env=environment("after"), check=True)
    rows = []
    for what in args.what:
        for students in args.students:
            for variant in args.variants:
                started = time.perf_counter()
                results = run_side_by_side(what, students, variant, args.cpus)
                key = "setup_and_explorers" if what == "setup" else "lab"
                times = sorted(r[key] for r in results)
                row = {"what": what, "students": students, "variant": variant, "median": statistics.median(times),
                       "max": times[-1], "threads": results[0]["threads"], "wall": time.perf_counter() - started,
                       "load": os.getloadavg()[0], "runs": results}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"load average at the end: {os.getloadavg()}")
    print(f"\n| what | students | variant | torch threads | median s | max s | load (1 min) |\n|---|---:|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['what']} | {row['students']} | {row['variant']} | {row['threads']} | {row['median']:.1f} | "
              f"{row['max']:.1f} | {row['load']:.1f} |")


if __name__ == "__main__":
    main()
