"""What one student connecting to a queue's broker in a loop costs the broker (root, in no cgroup) and her classmates.

    python bench/queue_flood.py [--seconds 5] [--hold]

A real broker (rlhf_course/classroom/training_broker.py's SlotBroker, K = 2, in a process of its own) serves two
students: a classmate who asks for a turn every 0.1 s (connect, read the first line, close), timed from connect to
answer, and a flooder: a process that connects and closes in a loop as fast as it can (with ``--hold``, while
holding a ticket of her own on another connection, so that every one of hers is refused).  Both phases, quiet and
flooded, print the classmate's answer time (p50 / max), the broker's CPU-seconds per second of wall time (from
/proc) and the flooder's connections per second, with the host's speed (bench/host_speed.py) before and after.
The students are told apart by pid (the broker reads a uid from each connection: here the bench's own process is
the classmate and any other the flooder).  Run it with PYTHONPATH set to the package to measure (another
checkout's, for a before).  About 3 x ``seconds``.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # bench.host_speed; PYTHONPATH's package first
from bench.host_speed import measure  # noqa: E402

BROKER = """
import os, sys
from pathlib import Path
from rlhf_course.classroom import training_broker
real_credentials, classmate = training_broker.peer_credentials, os.getppid()
def credentials(connection):
    pid, uid, gid = real_credentials(connection)
    return pid, 70_001 if pid == classmate else 70_002, gid
training_broker.peer_credentials = credentials
broker = training_broker.SlotBroker(Path(sys.argv[1]), 2, 180).start()
print(training_broker.__file__, flush=True)
sys.stdin.read()
broker.stop()
"""

FLOODER = """
import socket, sys, time
path, seconds, hold = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
if hold:
    held = socket.socket(socket.AF_UNIX)
    held.connect(path)
    held.recv(100)
connections, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(path)
        connections += 1
    except OSError:
        pass
    connection.close()
print(connections / seconds, flush=True)
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def classmate_answers(path: Path, seconds: float) -> list[float]:
    """Seconds from connect to the broker's first line, one ask every 0.1 s for ``seconds``."""
    answers, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect(str(path))  # blocking, as the queues' clients connect: a full backlog waits
            connection.settimeout(10)
            connection.recv(100)
        answers.append(time.monotonic() - started)
        time.sleep(0.1)
    return answers


def phase(broker: subprocess.Popen, path: Path, seconds: float, flood: bool, hold: bool) -> str:
    flooder = subprocess.Popen([sys.executable, "-c", FLOODER, str(path), str(seconds), "1" if hold else "0"],
                               stdout=subprocess.PIPE, text=True, cwd="/") if flood else None
    time.sleep(0.2 if flood else 0)
    cpu, wall = cpu_seconds(broker.pid), time.monotonic()
    answers = classmate_answers(path, seconds - 0.4 if flood else seconds)
    cpu, wall = cpu_seconds(broker.pid) - cpu, time.monotonic() - wall
    rate = float(flooder.communicate()[0]) if flooder else 0.0
    return (f"{'flooded' if flood else 'quiet':8} classmate's answer p50 {statistics.median(answers) * 1000:7.1f} ms, "
            f"max {max(answers) * 1000:7.1f} ms ({len(answers)} asks); broker {cpu / wall:.2f} CPU-s/s; "
            f"flooder {rate:,.0f} connections/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="each phase's length")
    parser.add_argument("--hold", action="store_true", help="the flooder holds a ticket while she floods")
    arguments = parser.parse_args()
    print(f"host speed before: {measure(1)[1]:.2f}x", flush=True)
    with tempfile.TemporaryDirectory(prefix="qflood-") as folder:
        path = Path(folder) / "broker.sock"
        broker = subprocess.Popen([sys.executable, "-c", BROKER, str(path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd="/")  # PYTHONPATH's package
        try:
            print(f"broker: {broker.stdout.readline().strip()}", flush=True)
            print(phase(broker, path, arguments.seconds, False, arguments.hold), flush=True)
            print(phase(broker, path, arguments.seconds, True, arguments.hold), flush=True)
        finally:
            broker.stdin.close()
            broker.wait(10)
    print(f"host speed after: {measure(1)[1]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
