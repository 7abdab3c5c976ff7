"""Where the suite leaves the machine's cores idle: the test files that wait rather than compute.

    python bench/idle_windows.py [--cores 2] [--out LOG] -- <the suite's command>

Runs the command with RLHF_TEST_CPU_LOG set, samples the machine's busy cores (/proc/stat) every half second
beside it, then prints the run's wall time and mean busy cores, and each test file's idle core-seconds: for
every sample, the cores left idle are shared among the tests running then (a test's span is its log line's
clock time minus its wall seconds).  A file high on this list waits (sleeps, time limits, servers starting
while nothing else runs); a file low on it computes.  Measure with nothing else running on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def sample(cores: int, every: float, stop: threading.Event, samples: list[tuple[float, float]]) -> None:
    """Append (clock time at the sample's end, busy cores over the sample) until stop is set."""
    busy, total = busy_jiffies()
    while not stop.wait(every):
        now_busy, now_total = busy_jiffies()
        samples.append((time.time(), cores * (now_busy - busy) / max(1, now_total - total)))
        busy, total = now_busy, now_total


def idle_by_file(samples: list[tuple[float, float]], tests: list[dict], cores: int,
                 every: float) -> dict[str, float]:
    """Idle core-seconds shared among the tests running at each sample, summed per test file."""
    spans = [(row["ended"] - row["wall"], row["ended"], row["test"].split("::", 1)[0]) for row in tests]
    idle = defaultdict(float)
    for at, busy in samples:
        running = [path for start, end, path in spans if start <= at - every / 2 <= end]
        for path in running:
            idle[path] += max(0.0, cores - busy) * every / len(running)
    return dict(idle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--out", type=Path, help="keep the per-test log here (else a temporary file)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the suite's command after --")
    log = args.out or Path(tempfile.mkstemp(suffix=".jsonl")[1])
    log.write_text("")
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(args.cores, args.every, stop, samples), daemon=True)
    started = time.time()
    sampler.start()
    returncode = subprocess.call(command, env={**os.environ, "RLHF_TEST_CPU_LOG": str(log)})
    stop.set()
    sampler.join()
    wall = time.time() - started
    tests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    tests = [row for row in tests if "ended" in row]
    mean_busy = sum(busy for _, busy in samples) / max(1, len(samples))
    print(f"\n{wall:.1f} s wall, {mean_busy:.2f} of {args.cores} cores busy on average "
          f"({mean_busy * wall:.0f} core-s used, {(args.cores - mean_busy) * wall:.0f} idle); command exit {returncode}")
    per_file = idle_by_file(samples, tests, args.cores, args.every)
    wall_by_file = defaultdict(float)
    for row in tests:
        wall_by_file[row["test"].split("::", 1)[0]] += row["wall"]
    print(f"{'idle core-s':>11} {'wall s':>7}  test file")
    for path, idle in sorted(per_file.items(), key=lambda item: -item[1])[:args.top]:
        print(f"{idle:11.1f} {wall_by_file[path]:7.1f}  {path}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
