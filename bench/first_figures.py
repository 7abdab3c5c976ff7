"""What the class's cache of first figures saves (rlhf_course/first_figures.py), and how often it hits.

    .venv/bin/python bench/first_figures.py --repeats 5

Kernels: each repeat starts three fresh python3 kernels (this environment, OMP_NUM_THREADS=1, pinned to one CPU)
that define the reference answers (the source notebook's set-up and answer cells) and run the three explorer cells,
reading the kernel's CPU time around each: without ``RLHF_FIRST_FIGURES`` (rendered), with it (a hit), and with it
after an rcParam changed (a miss that looked the key up).  The PNG shown is checked: the folder's in the first two
(a kernel's own rendering of the reference is the cached PNG, byte for byte), not in the third.  The folder
is made first (``python -m rlhf_course.classroom.first_figures``), as the hub makes it.

Variants: other ways of writing the three functions, right and wrong; for each, whether its first figure's key is
the reference's with the numbers keyed to exact bits, 9 and 6 significant digits, and whether the PNG it renders
to is the reference's.  Prints the host gauge (bench/host_speed.py) before and after.
"""
from __future__ import annotations

import argparse
import base64
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROBE = "import os as _o; _t = _o.times(); print('CPU', _t.user + _t.system + _t.children_user + _t.children_system)"
EXPLORER_CELLS = {"ppo_explorer": "ppo_explorer(ppo_clipped_objective)", "dpo_explorer": "dpo_explorer(dpo_loss)",
                  "gae_explorer": "gae_explorer(compute_gae)"}
ANOTHER_STYLE = "import matplotlib; matplotlib.rcParams['axes.edgecolor'] = '0.3'"


def answer_cells(notebook: Path) -> list[str]:
    """The notebook's set-up and answer cells (the reference answers, in the source notebook)."""
    import json
    cells = []
    for cell in json.loads(notebook.read_text())["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and (meta.get("solution") or meta.get("grade_id") == "setup"):
            cells.append("".join(cell["source"]))
    return cells


def explorer_cpu(env: dict, notebook: Path, before: str = "") -> dict[str, tuple[float, list[bytes]]]:
    """One fresh kernel: explorer -> (CPU-s of its cell, the PNGs it showed)."""
    from jupyter_client.manager import start_new_kernel
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    try:
        def cpu() -> float:
            said = []
            client.execute_interactive(PROBE, timeout=60, output_hook=lambda m: said.append(m["content"].get("text", "")))
            return float(re.findall(r"CPU ([0-9.]+)", "".join(said))[0])
        imports = "import matplotlib.pyplot, ipywidgets\nfrom rlhf_course.explorers import *"
        for source in [*answer_cells(notebook), imports, before]:
            reply = client.execute_interactive(source, timeout=300, output_hook=lambda m: None)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"a cell failed: {reply['content'].get('evalue')}")
        found = {}
        for name, source in EXPLORER_CELLS.items():
            pngs: list[bytes] = []

            def keep(message, pngs=pngs):
                if message["header"]["msg_type"] == "display_data" and "image/png" in message["content"]["data"]:
                    pngs.append(base64.b64decode(message["content"]["data"]["image/png"]))
            start = cpu()
            client.execute_interactive(source, timeout=300, output_hook=keep)
            found[name] = (cpu() - start, pngs)
        return found
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def variant_hits() -> None:
    """The variants' keys and PNGs against the reference's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch
    import torch.nn.functional as F

    from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, explorers, figure_output, first_figures
    from rlhf_course.classroom.first_figures import first_values
    from rlhf_course.lab.notebook_functions import functions_from_notebook
    reference = functions_from_notebook(REPO / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)

    def following(values, next_value):
        return torch.cat([values[1:], torch.tensor([float(next_value)], dtype=values.dtype)])

    def gae_from_deltas(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
        running, out = 0.0, []
        for delta in reversed(rewards + gamma * following(values, next_value) - values):
            running = delta + gamma * gae_lambda * running
            out.append(running)
        return torch.stack(out[::-1])

    def gae_as_a_matrix(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
        steps = torch.arange(rewards.shape[0])
        powers = (gamma * gae_lambda) ** (steps[None, :] - steps[:, None]).clamp(min=0).to(values.dtype)
        return (torch.triu(powers) * (rewards + gamma * following(values, next_value) - values)[None, :]).sum(1)

    def clip(r, eps):
        return torch.clamp(r, 1 - eps, 1 + eps)
    variants = {"ppo_clipped_objective": {
        "torch.where on the sign of A": lambda r, a, eps=0.2: torch.where(
            a >= 0, torch.minimum(r, torch.tensor(1 + eps, dtype=r.dtype)) * a,
            torch.maximum(r, torch.tensor(1 - eps, dtype=r.dtype)) * a).mean(),
        "torch.min for torch.minimum": lambda r, a, eps=0.2: torch.min(r * a, clip(r, eps) * a).mean(),
        "minus the max of negatives": lambda r, a, eps=0.2: -torch.max(-r * a, -a * clip(r, eps)).mean(),
        "WRONG: no clip": lambda r, a, eps=0.2: (r * a).mean()},
        "dpo_loss": {
        "-log(sigmoid(x))": lambda w, l, rw, rl, beta=0.1: -torch.log(torch.sigmoid(beta * ((w - rw) - (l - rl)))),
        "softplus(-x)": lambda w, l, rw, rl, beta=0.1: F.softplus(-beta * ((w - l) - (rw - rl))),
        "log1p(exp(-x))": lambda w, l, rw, rl, beta=0.1: torch.log1p(torch.exp(-beta * (w - rw - l + rl))),
        "WRONG: the sign": lambda w, l, rw, rl, beta=0.1: -F.logsigmoid(-beta * ((w - rw) - (l - rl)))},
        "compute_gae": {
        "deltas first, then the recursion": gae_from_deltas,
        "a matrix of (gamma lambda)^k": gae_as_a_matrix,
        "WRONG: lambda ignored": lambda r, v, nv=0.0, gamma=0.99, gae_lambda=0.95: gae_from_deltas(r, v, nv, gamma, 1.0)}}

    def key_and_png(function, name, digits):
        plot, sliders = explorers.EXPLORERS[name]
        values = first_values(sliders)
        drawn = plot(function, **values)
        figure = plt.gcf()
        key = first_figures.figure_key(figure, plot.__name__, values, drawn, "en", digits)
        png = figure_output.whole_png(figure)
        plt.close(figure)
        return key, png

    print("\nvariants (key = the reference's?  exact bits / 9 digits / 6 digits; own PNG = the reference's?):")
    for name, ways in variants.items():
        theirs = {digits: key_and_png(reference[name], name, digits) for digits in (None, 9, 6)}
        for label, function in ways.items():
            found = {digits: key_and_png(function, name, digits) for digits in (None, 9, 6)}
            hits = " / ".join("hit" if found[d][0] == theirs[d][0] else "miss" for d in (None, 9, 6))
            print(f"  {name:<22} {label:<34} {hits:<16} same PNG: {found[9][1] == theirs[9][1]}")


def host_speed() -> str:
    said = subprocess.run([sys.executable, str(REPO / "bench" / "host_speed.py")], capture_output=True, text=True)
    return said.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-variants", action="store_true")
    args = parser.parse_args()
    print(host_speed(), flush=True)
    folder = Path(tempfile.mkdtemp(prefix="first-figures-"))
    subprocess.run([sys.executable, "-m", "rlhf_course.classroom.first_figures", str(folder / "cache")], check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    cache = folder / "cache"
    cached = {path.read_bytes() for path in cache.glob("*.png")}
    print(f"cache: {len(cached)} PNGs, {sum(p.stat().st_size for p in cache.iterdir()) / 1e3:.0f} kB with its index")
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    base = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(REPO)}
    base.pop("RLHF_FIRST_FIGURES", None)
    runs = {"rendered (no variable)": (base, ""), "hit": ({**base, "RLHF_FIRST_FIGURES": str(cache)}, ""),
            "miss, looked up (an rcParam)": ({**base, "RLHF_FIRST_FIGURES": str(cache)}, ANOTHER_STYLE)}
    notebook = REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for label, (env, before) in runs.items():
            for name, (seconds, pngs) in explorer_cpu(env, notebook, before).items():
                cpu.setdefault((name, label), []).append(seconds)
                # a kernel's own rendering of the reference is the cache's PNG, byte for byte; another style is not
                if (before == "") != (len(pngs) == 1 and pngs[0] in cached):
                    raise RuntimeError(f"{name}, {label}: its PNG {'is not' if before == '' else 'is'} the cache's")
    print(f"\nCPU-s of each explorer's first drawing, fresh kernel, median of {args.repeats} (all):")
    for (name, label), values in sorted(cpu.items()):
        print(f"  {name:<13} {label:<30} {statistics.median(values):.3f}   ({' '.join(f'{v:.2f}' for v in values)})")
    if not args.no_variants:
        variant_hits()
    print(host_speed())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
