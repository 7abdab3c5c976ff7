"""The machine's training queue (rlhf_course/lab/training_slots.py): at most K labs train at once on a hub, the
others wait their turn and see it, whoever holds the slot (another Unix user's process, a dead one), and
nothing waits where no queue is configured."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from rlhf_course import i18n
from rlhf_course.lab import training_slots
from rlhf_course.lab.training_slots import TrainingQueue, training_slot

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder():
    """The queue's folder as the hub makes it, where another account can reach it (not under pytest's 0700 tmp)."""
    base = Path(tempfile.mkdtemp(prefix="training-slots-"))
    base.chmod(0o755)
    training_slots.create_folder(base / "slots", 1)
    yield base / "slots"
    shutil.rmtree(base, ignore_errors=True)


def holder(folder: Path, seconds: float, as_nobody: bool = False) -> subprocess.Popen:
    """Another process that takes the slot, says so, holds it: a lab's (TrainingQueue), or with ``as_nobody``
    another Unix user's taking the slot file's lock as the queue does (it may not read this checkout)."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from rlhf_course.lab.training_slots import TrainingQueue
        with TrainingQueue(Path({str(folder)!r}), 1).slot() as held:
            print("held" if held else "none", flush=True)
            time.sleep({seconds})
    """)
    if as_nobody:
        code = textwrap.dedent(f"""
            import fcntl, os, time
            descriptor = os.open({str(folder / "slot-0")!r}, os.O_RDONLY | os.O_NOFOLLOW)
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            print("held", flush=True)
            time.sleep({seconds})
        """)
    command = [sys.executable, "-c", code]
    if as_nobody:  # the system's Python: the checkout's may be out of another account's reach
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                   shutil.which("python3", path="/usr/bin:/bin") or sys.executable, "-c", code]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_no_folder_configured_is_no_queue_and_no_wait(monkeypatch):
    for variable in (training_slots.FOLDER_VARIABLE, training_slots.SLOTS_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    assert TrainingQueue.from_environment() is None
    assert TrainingQueue.from_environment({training_slots.FOLDER_VARIABLE: "/x", training_slots.SLOTS_VARIABLE: "0"}) is None
    queue = TrainingQueue.from_environment({training_slots.FOLDER_VARIABLE: "/srv/q", training_slots.SLOTS_VARIABLE: "3",
                                            training_slots.MAX_WAIT_VARIABLE: "60"})
    assert (queue.folder, queue.slots, queue.max_wait) == (Path("/srv/q"), 3, 60.0)
    said = []
    started = time.monotonic()
    with training_slot(say=said.append) as held:
        assert held is False
    assert said == [] and time.monotonic() - started < 0.1


def test_k_from_the_cores_and_each_users_quota():
    assert training_slots.default_slots(2, 1.0) == 2
    assert training_slots.default_slots(8, 1.5) == 5
    assert training_slots.default_slots(2, 4.0) == 1
    assert training_slots.default_slots(4, None) == 4


def test_the_second_process_waits_for_the_slot_then_trains(folder):
    """Another Unix user's process holds the only slot: this one waits, is told so, and takes it when freed."""
    other = holder(folder, 1.0, as_nobody=os.geteuid() == 0)
    said = []
    started = time.monotonic()
    with TrainingQueue(folder, 1, poll=0.05).slot(say=said.append) as held:
        waited = time.monotonic() - started
        assert held is True and other.poll() is not None  # the holder had finished
    assert other.wait() == 0
    assert 0.5 < waited < 2.5
    assert said[0] == "Waiting for a training slot: 0 ahead (the machine trains 1 at a time)"
    assert said[-1].startswith("Got a training slot after ")
    assert not list(folder.glob("wait-*"))  # its ticket is gone


def test_a_dead_holder_frees_its_slot_and_a_dead_waiter_is_not_ahead(folder):
    other = holder(folder, 60)
    dead_waiter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from pathlib import Path
        from rlhf_course.lab.training_slots import TrainingQueue
        queue = TrainingQueue(Path({str(folder)!r}), 1)
        with queue.slot(say=lambda line: print(line, flush=True)):
            pass
    """)], stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert dead_waiter.stdout.readline().startswith("Waiting for a training slot: 0 ahead")
    queue = TrainingQueue(folder, 1, poll=0.05)
    assert queue.waiters_ahead("wait-~") == 1
    for process in (dead_waiter, other):
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert queue.waiters_ahead("wait-~") == 0  # its ticket stays, nobody holds it (and it is removed: ours)
    said = []
    started = time.monotonic()
    with queue.slot(say=said.append) as held:
        assert held is True and time.monotonic() - started < 0.5 and said == []


def test_nobody_waits_past_the_cap_and_the_message_is_in_the_notebooks_language(folder):
    other = holder(folder, 30)
    try:
        said = []
        started = time.monotonic()
        with i18n.speaking(i18n.CHINESE):
            with TrainingQueue(folder, 1, max_wait=0.3, poll=0.05).slot(say=said.append) as held:
                assert held is False and 0.3 <= time.monotonic() - started < 1.5
        assert said == ["正在等待训练名额：前面还有 0 个训练任务在等待（本机最多同时运行 1 个）",
                        "已等待训练名额 0 秒：不再等待，不占名额直接开始训练"]
    finally:
        other.kill()
        other.wait()
