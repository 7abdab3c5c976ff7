"""Where a burst's cell latency goes (issue #37): the CPU seconds one kernel spends on each code cell of the
``rlhf`` notebook, alone, and the bound they put on a class that runs them all at once.

    .venv/bin/python bench/cell_cpu.py --repeats 3 --lab-cache /tmp/lab-cache --students 30

Each repeat starts a fresh python3 kernel (this environment, the hub's thread settings: OMP_NUM_THREADS=1,
OMP_WAIT_POLICY=PASSIVE; pinned to one CPU as a user's 1-core quota does), runs the release notebook's code cells
in order with the reference answers typed in (as bench/classroom.py does), and reads the kernel's CPU time
(``os.times()``: itself and its children, user and system) before and after each cell with a silent request.
Figures: per cell and per group (kernel start, the set-up cell, the explorers, the answers and visible tests,
the training cell, its plots) the median over repeats of the CPU seconds and of the wall seconds.

The bound: N kernels that each need X CPU-s for the same cell at the same moment on C cores cannot all be done
before N * X / C seconds (the last of them waits for the others' share); the p95 of a burst's cell latency is
at least that bound for the cells that make up its top 5 %.  With ``--server``, the CPU seconds a JupyterLab
server (``jupyter lab``, this environment, the course's extensions) spends until its API answers, and the
same bound for N servers starting at once (the spawn).

Needs the lab's shared SFT policy and reward model in ``--lab-cache`` (``python -m rlhf_course.lab.shared_stages
FOLDER --threads 1`` fills it) or the training cell trains them too, as a student without the class's cache does.
Run from the checkout (needs ``source/``: the reference answers).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

PROBE = "import os as _o; _t = _o.times(); print('CPU', _t.user + _t.system + _t.children_user + _t.children_system)"
EXPLORERS = ("ppo_explorer", "dpo_explorer", "gae_explorer")


def group_of(grade_id: str, index: int) -> str:
    """The group a code cell belongs to in the figures."""
    if index == 0:
        return "set-up cell (imports torch)"
    if grade_id in EXPLORERS:
        return "explorers (matplotlib, widgets)"
    if grade_id == "lab_run":
        return "training cell (lab_run)"
    if grade_id == "lab_plots":
        return "training plots (lab_plots)"
    return "answers and tests (38 small cells)"


def bound_seconds(students: int, cpu_seconds: float, cores: int) -> float:
    """The earliest moment the last of ``students`` kernels, each needing ``cpu_seconds`` of CPU for the same
    cell at the same time, can be done on ``cores`` cores (each kernel uses at most one core)."""
    return cpu_seconds * max(1.0, students / cores)


def run_notebook(cells: list[dict], env: dict, cwd: Path, preamble: str = "") -> tuple[float, list[tuple[float, float]]]:
    """One fresh kernel: (its CPU seconds at its first answer, after ``preamble`` if any: what a warm kernel did
    before the notebook came; [(cpu s, wall s) per code cell])."""
    from jupyter_client.manager import start_new_kernel
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(cwd), startup_timeout=120)
    try:
        def cpu() -> float:
            said = []  # the stream may come in pieces
            client.execute_interactive(PROBE, timeout=60, output_hook=lambda m: said.append(
                m.get("content", {}).get("text", "") if m["header"]["msg_type"] == "stream" else ""))
            found = re.findall(r"CPU ([0-9.]+)", "".join(said))
            if not found:
                raise RuntimeError(f"the CPU probe said nothing: {said}")
            return float(found[0])
        if preamble:
            reply = client.execute_interactive(preamble, timeout=300, silent=True)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"the preamble failed: {reply['content'].get('evalue')}")
        start = cpu()
        figures = []
        for cell in cells:
            before, began = cpu(), time.perf_counter()
            reply = client.execute_interactive(cell["source"], timeout=900, output_hook=lambda m: None)
            wall = time.perf_counter() - began
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"a cell failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
            figures.append((cpu() - before, wall))
        return start, figures
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def process_cpu(pid: int) -> float:
    """A process's CPU seconds (user + system, its children that ended too), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def server_start_cpu(env: dict) -> tuple[float, float]:
    """CPU and wall seconds a JupyterLab server spends until ``/api/status`` answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(tempfile.mkdtemp(prefix="cell-cpu-server-"))
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
                                "--ip=127.0.0.1", "--IdentityProvider.token=cellcpu", f"--ServerApp.root_dir={root}",
                                "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token=cellcpu", timeout=5)
                urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=cellcpu", timeout=30)
                break
            except OSError:
                if process.poll() is not None or time.perf_counter() - began > 120:
                    raise RuntimeError("jupyter lab did not start")
                time.sleep(0.05)
        return process_cpu(process.pid), time.perf_counter() - began
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lab-cache", type=Path, help="RLHF_LAB_CACHE: the shared SFT policy and reward model")
    parser.add_argument("--students", type=int, default=30, help="N for the bound")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--cpu", type=int, default=None, help="the CPU to pin the kernel to (default: the last)")
    parser.add_argument("--server", action="store_true", help="also a JupyterLab server's start")
    parser.add_argument("--preamble", default="", help="code a kernel runs before the notebook (a warm kernel's "
                        "imports): its CPU counts in the kernel start, not in the cells")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from classroom import answered_notebook, reference_answers
    nb = answered_notebook(json.loads((REPO / "release" / "rlhf" / "rlhf_building_blocks.ipynb").read_text()),
                           reference_answers())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for cell in cells:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") for c in cells]
    os.sched_setaffinity(0, {args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("RLHF_LAB_SETTING", None)
    if args.lab_cache:
        env["RLHF_LAB_CACHE"] = str(args.lab_cache)
    load = os.getloadavg()
    starts, runs = [], []
    for repeat in range(args.repeats):
        folder = Path(tempfile.mkdtemp(prefix="cell-cpu-"))
        try:
            start, figures = run_notebook(cells, env, folder, args.preamble)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        starts.append(start)
        runs.append(figures)
        print(f"repeat {repeat + 1}: kernel start {start:.2f} CPU-s, notebook {sum(c for c, _ in figures):.2f} CPU-s",
              flush=True)
    per_cell = [(ids[i], statistics.median(r[i][0] for r in runs), statistics.median(r[i][1] for r in runs))
                for i in range(len(cells))]
    groups: dict[str, list[float]] = {"kernel start (ipykernel, before the first cell)": [statistics.median(starts), 0.0, 1]}
    for index, (grade_id, cpu, wall) in enumerate(per_cell):
        g = groups.setdefault(group_of(grade_id, index), [0.0, 0.0, 0])
        g[0] += cpu
        g[1] += wall
        g[2] += 1
    result = {"load_at_start": load, "load_at_end": os.getloadavg(), "repeats": args.repeats,
              "per_cell": [{"grade_id": g, "cpu_s": c, "wall_s": w} for g, c, w in per_cell],
              "groups": {k: {"cpu_s": v[0], "wall_s": v[1], "cells": v[2]} for k, v in groups.items()}}
    print(f"\nper cell, median of {args.repeats} (CPU s / wall s), load {' '.join(f'{x:.2f}' for x in load)}:")
    for index, (grade_id, cpu, wall) in enumerate(per_cell):
        if cpu >= 0.05 or index == 0:
            print(f"  {index:2d} {grade_id:<40} {cpu:6.2f} {wall:6.2f}")
    small = [cpu for _, cpu, _ in per_cell if cpu < 0.05]
    print(f"  the other {len(small)} cells: {sum(small):.2f} CPU-s together, at most {max(small, default=0):.3f} each")
    n, cores = args.students, args.cores
    print(f"\ngroups (CPU s, wall s alone; bound for {n} kernels at once on {cores} cores = N x CPU / cores):")
    for name, (cpu, wall, count) in groups.items():
        print(f"  {name:<48} {cpu:6.2f} {wall:6.2f}   bound {bound_seconds(n, cpu, cores):6.1f} s")
    total = sum(v[0] for k, v in groups.items())
    apart = total - groups.get("training cell (lab_run)", [0])[0]
    print(f"  a notebook, kernel start included: {total:.2f} CPU-s; training apart {apart:.2f}: "
          f"{n} students need {n * apart / cores:.0f} s of the {cores} cores for the cells other than training")
    if args.server:
        server = [server_start_cpu(env) for _ in range(args.repeats)]
        cpu, wall = statistics.median(s[0] for s in server), statistics.median(s[1] for s in server)
        result["server_start"] = {"cpu_s": cpu, "wall_s": wall}
        print(f"  JupyterLab server start: {cpu:.2f} CPU-s, {wall:.2f} s alone; {n} at once: bound "
              f"{bound_seconds(n, cpu, cores):.1f} s")
    print(f"load at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
