"""What the class's Validate queue does to a class's Validates pressed at once: N fake Validates, each a process
computing WORK CPU-seconds (a Validate's kernel running the notebook), through the real broker with K slots
(rlhf_course/classroom/validate_queue.py, training_broker.SlotBroker), then all at once without a queue.

    python bench/validate_queue.py [--students 16] [--work 0.5] [--slots 2]

Prints, for each, the press-to-verdict p50 and max, the most Validates computing at once (each a second kernel,
~260 MiB with torch: the memory the class's Validates take) and the places said to the waiters, with the host's
speed (bench/host_speed.py) before and after.  In-process: the students are told apart per connection (the
broker reads a uid from each; here each connection is given its own, as tests/classroom/test_validate_queue.py
does); no hub, no kernels (bench/classroom.py measures those).  A few seconds.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.host_speed import measure  # noqa: E402
from rlhf_course.classroom import training_broker  # noqa: E402
from rlhf_course.classroom.validate_queue import ValidateQueue, validate_turn  # noqa: E402


@dataclass
class Run:
    seconds: list[float]  # each Validate's press-to-verdict, in order of finishing
    most_at_once: int  # Validates computing at the same time, at most
    places_said: list[int]  # every "N ahead" said to a waiter


def press_at_once(students: int, work: float, slots: int) -> Run:
    """``students`` Validates of ``work`` CPU-seconds each, pressed together, ``slots`` at a time (0: no queue)."""
    uids = itertools.count(60_000)
    real_credentials = training_broker.peer_credentials
    training_broker.peer_credentials = lambda connection: (os.getpid(), next(uids), 0)
    folder = tempfile.TemporaryDirectory(prefix="vq-bench-")
    broker = training_broker.SlotBroker(Path(folder.name) / "broker.sock", slots, 600).start() if slots else None
    queue = ValidateQueue(broker.path) if broker else None
    burn = f"import time\nend = time.process_time() + {work}\nwhile time.process_time() < end:\n    pass\n"
    seconds, places, computing, most = [], [], [0], [0]
    lock = threading.Lock()

    def validate() -> None:
        pressed = time.monotonic()
        with validate_turn(queue, lambda english, fields: places.append(fields["ahead"])):
            with lock:
                computing[0] += 1
                most[0] = max(most[0], computing[0])
            subprocess.run([sys.executable, "-c", burn], check=True)
            with lock:
                computing[0] -= 1
        seconds.append(time.monotonic() - pressed)

    try:
        runs = [threading.Thread(target=validate) for _ in range(students)]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    finally:
        if broker:
            broker.stop()
        folder.cleanup()
        training_broker.peer_credentials = real_credentials
    return Run(seconds, most[0], places)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=16)
    parser.add_argument("--work", type=float, default=0.5, help="CPU-seconds each Validate computes")
    parser.add_argument("--slots", type=int, default=2, help="K, the Validate queue's slots")
    args = parser.parse_args()
    print(f"host speed before: {measure(1)[1]:.2f}x the reference hour's", flush=True)
    for slots in (args.slots, 0):
        run = press_at_once(args.students, args.work, slots)
        print(f"{'K = %d' % slots if slots else 'no queue':>9}: {args.students} Validates of {args.work:g} CPU-s, "
              f"press to verdict p50 {statistics.median(run.seconds):.2f} s, max {max(run.seconds):.2f} s; "
              f"at most {run.most_at_once} computing at once; {len(run.places_said)} places said"
              + (f" (the first: {max(run.places_said)} ahead)" if run.places_said else ""), flush=True)
    print(f"host speed after: {measure(1)[1]:.2f}x the reference hour's")


if __name__ == "__main__":
    main()
