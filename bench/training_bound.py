"""The best a class's training cells could do, from when a class bench run started them.

    python bench/training_bound.py RUN.json [--cores 2] [--pair-factor 1.0] [--at-the-class-speed]

Reads a `bench/classroom.py --json` run (each student's ``training_at``: when they ran the training cell, and the
training cell's time alone) and replays those arrivals on an ideal machine: nothing else running, each training
on one core at its speed alone (a user's quota is one core, so no training can go faster than alone), at most
``--cores`` at once, the others waiting first come, first served (for trainings of equal length no order ends the
last one sooner).  ``--pair-factor`` slows every training while the cores are all training, by what two trainings
side by side cost each other on this machine (measured apart: 1.0 is the ideal).  Prints the p50 / p95 of each
training's time over its time alone, to set beside the run's own: where the ideal's p95 is above a goal, no
scheduling on this machine meets that goal for these arrivals.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.classroom import percentile  # noqa: E402 (the class bench's, so both p95s are the same statistic)


def replay(arrivals: list[float], alone: float, cores: int = 2, pair_factor: float = 1.0) -> list[float]:
    """Each training's time (waiting included) when started at ``arrivals`` (s) on ``cores`` cores, first come
    first served, each taking ``alone`` seconds on a core of its own, ``alone * pair_factor`` while every core
    trains (a piecewise simulation: speeds change when a training starts or ends)."""
    pending = sorted(arrivals)
    running: list[list[float]] = []  # [work left (alone-seconds), arrival]
    finished: list[float] = []
    now, index = 0.0, 0
    while index < len(pending) or running:
        while index < len(pending) and len(running) < cores and pending[index] <= now:
            running.append([alone, pending[index]])
            index += 1
        speed = 1.0 / pair_factor if len(running) >= cores and cores > 1 else 1.0
        next_end = now + min(r[0] for r in running) / speed if running else math.inf
        next_arrival = pending[index] if index < len(pending) and len(running) < cores else math.inf
        step_to = min(next_end, max(next_arrival, now))
        if step_to is math.inf:  # waiting trainings but none running cannot happen: cores > 0
            raise RuntimeError("no progress")
        for r in running:
            r[0] -= (step_to - now) * speed
        now = step_to
        for r in [r for r in running if r[0] <= 1e-9]:
            running.remove(r)
            finished.append(now - r[1])
    return finished


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="bench/classroom.py --json output")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--pair-factor", type=float, default=1.0)
    parser.add_argument("--at-the-class-speed", action="store_true",
                        help="replay each training at the machine's speed during the class, not before it: the "
                             "time alone scaled by the class's median kernel CPU per notebook over the student "
                             "alone's (the same notebook, so the same work; this machine's speed drifts by 2x "
                             "within an hour)")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text())
    figures = run["class"]
    alone = figures["training_s"]["alone"]
    arrivals = [s["training_at"] for s in figures["per_student"] if not math.isnan(s.get("training_at", math.nan))]
    if not arrivals:
        raise SystemExit(f"{args.run}: no student's training start recorded (a run before bench/classroom.py "
                         f"recorded training_at)")
    replayed = alone
    if args.at_the_class_speed:
        speed = figures["cpu_s_per_notebook"]["p50"] / run["alone"]["cpu_seconds"]
        replayed = alone * speed
        print(f"the class's machine: a notebook's kernel CPU {speed:.2f}x the student alone's: each training "
              f"replayed at {replayed:.2f} s")
    ideal = [t / alone for t in replay(arrivals, replayed, args.cores, args.pair_factor)]
    measured = [s["training"] / alone for s in figures["per_student"] if not math.isnan(s["training"])]
    span = max(arrivals) - min(arrivals)
    print(f"{len(arrivals)} trainings started over {span:.0f} s; alone {alone:.2f} s; {args.cores} cores, "
          f"pair factor {args.pair_factor}")
    print(f"  ideal machine: p50 {percentile(ideal, 50):.2f}x, p95 {percentile(ideal, 95):.2f}x, "
          f"max {max(ideal):.2f}x alone")
    print(f"  the run:       p50 {percentile(measured, 50):.2f}x, p95 {percentile(measured, 95):.2f}x, "
          f"max {max(measured):.2f}x alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
