"""How fast this host's cores are right now: seconds one core takes for a fixed piece of work.

    python bench/host_speed.py [--repeat 3]

This machine's speed swings by up to 2x within an hour (other tenants of its host; /proc/stat shows almost no
steal), so a suite's or a bench's wall time means little without the speed it ran at beside it, as a load figure
needs the load.  The work is what the suite spends its CPU on in small: the interpreter (dicts, strings, calls),
torch on one thread (small matrix products and their gradients) and starting an interpreter that imports torch.
It prints the median of ``repeat`` runs in seconds and its ratio to REFERENCE_SECONDS (this host on 2026-12-06 at
13:33 UTC; bench/RESULTS.md): a ratio of 1.25 means the same work takes 25 % longer now.  Run it with nothing else
running; .ci/run and suite_cpu.py run it before and after the suite.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

REFERENCE_SECONDS = 2.45  # the reference hour's: bench/RESULTS.md, "Host speed"


def interpreter_work() -> int:
    """Dicts, strings, calls and loops: what the test processes' own Python does."""
    table: dict[str, int] = {}
    total = 0
    for i in range(1_500_000):
        key = f"cell-{i % 977}"
        table[key] = table.get(key, 0) + i
        total += len(key)
    return total + sum(table.values()) % 7


def torch_work() -> float:
    """Small matrix products and their gradients on one thread: what the lab's training and the judging do."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(128, 128, generator=generator, requires_grad=True)
        inputs = torch.randn(64, 128, generator=generator)
        for _ in range(5_000):
            loss = torch.tanh(inputs @ weight).square().mean()
            loss.backward()
        return float(weight.grad.abs().sum())
    finally:
        torch.set_num_threads(threads)


def start_work() -> float:
    """A fresh interpreter importing torch, matplotlib and nbformat, as every kernel, sandbox and command of the
    suite starts (files read, byte code loaded, libraries linked, memory touched): its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import torch, matplotlib.pyplot, nbformat"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def seconds_of_work() -> float:
    """One core's seconds for the fixed work (CPU time, not wall: a preempted run still counts right)."""
    torch_work()  # warm: torch's first call pays its one-time set-up
    started = time.process_time()
    interpreter_work()
    torch_work()
    return time.process_time() - started + start_work()


def measure(repeat: int = 3) -> tuple[float, float]:
    """(median seconds of the work, ratio to the reference hour's)."""
    seconds = statistics.median(seconds_of_work() for _ in range(repeat))
    return seconds, seconds / REFERENCE_SECONDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    seconds, ratio = measure(parser.parse_args().repeat)
    print(f"host speed: {seconds:.3f} s for the fixed work, {ratio:.2f}x the reference hour's")


if __name__ == "__main__":
    main()
