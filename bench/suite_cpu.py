"""Where the test suite's CPU goes, and where its cores wait: each test file's core-seconds, its own processes'
and all they started (servers, kernels, sandboxes, Chromium) counted together.

    python bench/suite_cpu.py [--out LOG] [--top 30] -- <the suite's command>

Runs the command with RLHF_TEST_CPU_LOG set (each test's span: its log line's clock time minus its wall
seconds; its worker's pid) and samples every process's CPU time (/proc) every half second beside it.  A process's
CPU belongs to the pytest worker it descends from and so to the test that worker was running; CPU of processes
outside the suite (PostgreSQL, the system, daemons that left their parents) is counted apart, as is the CPU a
process spent in the last half second before it exited.  Prints the run's wall time, the
machine's busy cores, then per test file: core-seconds used, and idle core-seconds (the cores idle at each sample
shared among the tests running then: a file high on it waits rather than computes).  The host's speed
(bench/host_speed.py) is measured before and after and printed beside the figures.  Measure with nothing else
running on the machine.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import host_speed  # noqa: E402 (this folder's, run as a script)

TICKS = os.sysconf("SC_CLK_TCK")


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used so far) of every process."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (command)"
        found[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    return found


def program(pid: int) -> str:
    """What a process runs, in a few words: `python -m module`, `python script.py`, `chromium --type=renderer`."""
    try:
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return "?"
    if not argv:
        return "?"
    words = argv[0].split() + argv[1:]  # Chromium's helpers rewrite their command line as one string
    argv, name = words, Path(words[0]).name
    if name.startswith("playwright_chromium") or name == "exe":
        name = "chromium"
    if name.startswith("python"):
        for i, arg in enumerate(argv[1:], 1):
            if arg == "-m" and i + 1 < len(argv):
                return f"python -m {argv[i + 1]}"
            if arg == "-c":
                return "python -c ..."
            if not arg.startswith("-"):
                return f"python {Path(arg).name}"
        return "python"
    kind = next((a for a in argv[1:] if a.startswith("--type=")), "")
    return f"{name} {kind}".strip()


class Sampler:
    """Every `every` seconds: the machine's busy cores, and the CPU seconds of each child of the suite's command
    (a pytest worker) with all its descendants."""

    def __init__(self, cores: int, every: float):
        self.cores, self.every = cores, every
        # (time, busy cores, (worker pid, program) -> CPU s); worker pid 0: outside the suite
        self.samples: list[tuple[float, float, dict[tuple[int, str], float]]] = []
        self.stop = threading.Event()
        self.command_pid = 0
        self.owner: dict[int, int] = {}  # pid -> the command's child it descends from (0: none), decided once
        self.program_of: dict[int, str] = {}  # pid -> program, decided once
        self.started: dict[str, int] = defaultdict(int)  # program -> processes seen

    def owner_of(self, pid: int, table: dict[int, tuple[int, float]]) -> int:
        chain = []
        while pid > 1 and pid not in self.owner:
            chain.append(pid)
            parent = table.get(pid, (1, 0.0))[0]
            if parent == self.command_pid:
                found = pid
                break
            pid = parent
        else:
            found = self.owner.get(pid, 0)
        for each in chain:
            self.owner[each] = found
        return found

    def run(self) -> None:
        busy, total = busy_jiffies()
        before = processes()
        while not self.stop.wait(self.every):
            now_busy, now_total = busy_jiffies()
            table = processes()
            used: dict[tuple[int, str], float] = defaultdict(float)
            for pid, (_, cpu) in table.items():
                seconds = cpu - before.get(pid, (0, 0.0))[1]
                if seconds > 0:
                    used[self.owner_of(pid, table), self.program_named(pid)] += seconds
            self.samples.append((time.time(), self.cores * (now_busy - busy) / max(1, now_total - total),
                                 dict(used)))
            busy, total, before = now_busy, now_total, table
            for gone in set(self.owner) - set(table):  # pids are reused: forget the dead
                del self.owner[gone]
            for gone in set(self.program_of) - set(table):
                del self.program_of[gone]

    def program_named(self, pid: int) -> str:
        """The process's program (its command's name and module or script), counted once per process."""
        if pid not in self.program_of:
            self.program_of[pid] = program(pid)
            self.started[self.program_of[pid]] += 1
        return self.program_of[pid]


def attribute(samples, tests: list[dict], cores: int, key=lambda test: test.split("::", 1)[0]) -> dict[str, dict]:
    """Test file (or what `key` makes of a test's id) -> {"used": core-s of its worker's processes while its tests
    ran, "idle": its share of the idle cores, "wall": its tests' wall seconds, "programs": program -> core-s}."""
    spans = [(row["ended"] - row["wall"], row["ended"], row["pid"], key(row["test"])) for row in tests]
    found: dict[str, dict] = defaultdict(lambda: {"used": 0.0, "idle": 0.0, "wall": 0.0,
                                                  "programs": defaultdict(float)})
    for row in tests:
        found[key(row["test"])]["wall"] += row["wall"]
    previous = samples[0][0] if samples else 0.0
    for at, busy, used in samples[1:]:
        middle = (previous + at) / 2
        running = [(worker, name) for start, end, worker, name in spans if start <= middle <= end]
        for worker, name in running:
            found[name]["idle"] += max(0.0, cores - busy) * (at - previous) / len(running)
            for (owner, program_name), seconds in used.items():
                if owner == worker:
                    found[name]["used"] += seconds
                    found[name]["programs"][program_name] += seconds
        previous = at
    return dict(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--out", type=Path, help="keep the per-test log here (else a temporary file)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--tests-of", action="append", default=[], metavar="FILE",
                        help="also list this test file's tests one by one (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the suite's command after --")
    log = args.out or Path(tempfile.mkstemp(suffix=".jsonl")[1])
    log.write_text("")
    speed_before = host_speed.measure()
    sampler = Sampler(args.cores, args.every)
    thread = threading.Thread(target=sampler.run, daemon=True)
    started = time.time()
    suite = subprocess.Popen(command, env={**os.environ, "RLHF_TEST_CPU_LOG": str(log)})
    sampler.command_pid = suite.pid
    thread.start()
    returncode = suite.wait()
    sampler.stop.set()
    thread.join()
    wall = time.time() - started
    speed_after = host_speed.measure()
    tests = [row for row in map(json.loads, filter(str.strip, log.read_text().splitlines())) if "pid" in row]
    names = {row["pid"]: row["worker"] for row in tests}
    samples = sampler.samples
    mean_busy = sum(busy for _, busy, _ in samples) / max(1, len(samples))
    by_worker: dict[str, float] = defaultdict(float)
    by_program: dict[str, float] = defaultdict(float)
    for _, _, used in samples:
        for (pid, name), seconds in used.items():
            by_worker[names.get(pid, "the command" if pid else "outside the suite")] += seconds
            by_program[name] += seconds
    print(f"\n{wall:.1f} s wall, {mean_busy:.2f} of {args.cores} cores busy on average ({mean_busy * wall:.0f} "
          f"core-s used, {(args.cores - mean_busy) * wall:.0f} idle); command exit {returncode}")
    print(f"host speed (bench/host_speed.py): {speed_before[0]:.3f} s before, {speed_after[0]:.3f} s after: "
          f"{speed_before[1]:.2f}x and {speed_after[1]:.2f}x the reference hour's time")
    print("core-s by worker: " + ", ".join(f"{w} {s:.0f}" for w, s in sorted(by_worker.items())))
    files = sorted(attribute(samples, tests, args.cores).items(), key=lambda item: -item[1]["used"])
    print(f"{'used core-s':>11} {'idle core-s':>11} {'wall s':>7}  test file")
    for path, figures in files[:args.top]:
        print(f"{figures['used']:11.1f} {figures['idle']:11.1f} {figures['wall']:7.1f}  {path}")
    print("\nby program (core-s; processes seen):")
    for name, seconds in sorted(by_program.items(), key=lambda item: -item[1])[:args.top]:
        print(f"{seconds:11.1f} {sampler.started[name]:6d}  {name}")
    print("\nthe programs of the costliest files (core-s):")
    for path, figures in files[:12]:
        top = sorted(figures["programs"].items(), key=lambda item: -item[1])[:5]
        print(f"  {path}: " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in top))
    for path in args.tests_of:
        print(f"\n{path}, test by test (a module fixture's cost falls on the test that first asked for it):")
        mine = [row for row in tests if row["test"].split("::", 1)[0] == path]
        for test, figures in attribute(samples, mine, args.cores, key=lambda test: test.split("::", 1)[1]).items():
            top = sorted(figures["programs"].items(), key=lambda item: -item[1])[:4]
            print(f"{figures['used']:11.1f} {figures['idle']:11.1f} {figures['wall']:7.1f}  {test}: "
                  + ", ".join(f"{name} {seconds:.1f}" for name, seconds in top))
    return returncode


if __name__ == "__main__":
    sys.exit(main())
