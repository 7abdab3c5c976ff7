"""The training queue's broker (rlhf_course/classroom/training_broker.py) against a student who tries to take it: two
real Unix accounts, Mallory (raw sockets, whatever she likes) and Ann (the lab's own client,
rlhf_course/lab/training_slots.py), each running the system's Python as themselves; the broker runs here, as root,
as `make hub` runs it.  Mallory holding her slot for ever, flooding or forging requests, or leaving her grant to a
child delays Ann by one hold at most; a second ticket of one user is refused, and her lab waits for the first; the boost follows the broker's
grants, and stopping Mallory's server kills her holding process and gives her weight back (a few seconds)."""
import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlhf_course.classroom import accounts, spawner
from rlhf_course.classroom.cpu_shares import DEFAULT_WEIGHT, CpuShares, user_cgroup
from rlhf_course.classroom.training_broker import SlotBroker
from tests.support.accounts import PREFIX
from tests.support.cgroups import cpu_weight

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"  # every account can run it, unlike the checkout's .venv
WAITING = "Waiting for a training slot: 0 ahead (the machine trains 1 at a time)"
GOT = "Got a training slot after "


@pytest.fixture(scope="module")
def students():
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd"):
        pytest.skip("two real accounts need root, setpriv and useradd")
    folder = Path(tempfile.mkdtemp(prefix="rlhf-broker-test-"))
    folder.chmod(0o755)
    names = {"mallory": f"{PREFIX}_qmal", "ann": f"{PREFIX}_qann"}
    accounts.remove_accounts(names.values())
    for name in names.values():
        accounts.add_account(name, folder / "home" / name)
    # the package where every account can read it (a checkout, e.g. CI's, may be private to root)
    shutil.copytree(REPO / "rlhf_course", folder / "package" / "rlhf_course",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run(["chmod", "-R", "go+rX", folder / "package"], check=True)
    yield {role: accounts.User(name, folder / "home" / name, None) for role, name in names.items()} | {"folder": folder}
    spawner.remove_user_resources(names.values(), folder / "run")
    accounts.remove_accounts(names.values())
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def start_broker(students):
    """A broker on a socket every account can reach, K = 1; its holders' pids as reported (``reported``), and the
    uid of each grant in order (``granted_uids``)."""
    started = []

    def start(max_hold: float, boost: CpuShares | None = None) -> SlotBroker:
        reported, granted_uids = [], []
        path = Path(tempfile.mkdtemp(prefix="queue-", dir=students["folder"])) / "broker.sock"
        path.parent.chmod(0o755)

        def on_holders(pids):
            granted_uids.extend(os.stat(f"/proc/{pid}").st_uid for pid in pids - (reported[-1] if reported else set()))
            reported.append(pids)
            if boost:
                boost.training(pids)
        broker = SlotBroker(path, 1, max_hold, on_holders).start()
        broker.reported, broker.granted_uids = reported, granted_uids
        started.append(broker)
        return broker
    yield start
    for broker in started:
        broker.stop()


def as_student(user: accounts.User, code: str, *args: str, **popen) -> subprocess.Popen:
    """``code`` run by ``user``'s own system Python (a readable copy of this checkout's package on its path), lines
    out as they come."""
    package = user.home.parent.parent / "package"
    command = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "env", "-i",
               f"PYTHONPATH={package}", "LANG=C.UTF-8", SYSTEM_PYTHON, "-c", textwrap.dedent(code), *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", **popen)


# Ann's training cell: the lab's client waits its turn, trains `seconds` in its slot, and says when it had it.
ANNS_LAB = """
    import sys, time
    from pathlib import Path
    from rlhf_course.lab.training_slots import TrainingQueue
    started = time.monotonic()
    with TrainingQueue(Path(sys.argv[1]), max_wait=float(sys.argv[3])).slot(say=print) as held:
        print(f"held {held} after {time.monotonic() - started:.2f}", flush=True)
        time.sleep(float(sys.argv[2]))
"""

# Mallory holds her slot for ever: she never closes a connection, and asks again the moment one is ended.
HOLD_FOR_EVER = """
    import socket, sys
    while True:
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(sys.argv[1])
        for line in connection.makefile():
            print(line.strip(), flush=True)
"""


def anns_lab(students, broker, training: float = 0.2, max_wait: float = 30) -> tuple[list[str], bool, float]:
    """Ann's training cell run to its end: what it said, whether it had a slot, and after how many seconds."""
    lab = as_student(students["ann"], ANNS_LAB, str(broker.path), str(training), str(max_wait))
    out, err = lab.communicate(timeout=60)
    lines = out.splitlines()
    assert lab.returncode == 0 and lines and lines[-1].startswith("held "), out + err
    _, held, _, seconds = lines[-1].split()
    return lines[:-1], held == "True", float(seconds)


def wait_for(predicate, seconds: float = 5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def dead(pid: int) -> bool:
    """Whether the process has exited (gone, or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop(process: subprocess.Popen) -> str:
    process.kill()
    out, _ = process.communicate()
    return out


def test_a_slot_held_for_ever_delays_a_classmate_by_one_hold_at_most(students, start_broker):
    broker = start_broker(max_hold=1.0)
    mallory = as_student(students["mallory"], HOLD_FOR_EVER, str(broker.path))
    try:
        wait_for(lambda: broker.holder_pids == {mallory.pid})
        said, held, seconds = anns_lab(students, broker, training=0.3)
        assert said[0] == WAITING and said[1].startswith(GOT) and len(said) == 2 and held
        assert seconds < 1.0 + 0.5  # her turn came when Mallory's hold ended, never later
        mallory_uid, ann_uid = students["mallory"].uid, students["ann"].uid
        wait_for(lambda: broker.granted_uids == [mallory_uid, ann_uid, mallory_uid])
    finally:
        out = stop(mallory)
    # Mallory's hold was ended; asking again at once put her behind Ann, and she had the slot after Ann
    assert out.splitlines()[:4] == ["granted 1 1", "ended", "queued 0 1", "granted 1 1"], out


def test_flooding_and_forged_requests_put_nobody_ahead(students, start_broker):
    """Mallory holds the slot and then asks 200 times more: from the same process, from forked children and with the
    broker's own words written to it; every extra request is refused, and Ann is told 0 ahead, then served."""
    broker = start_broker(max_hold=1.0)
    mallory = as_student(students["mallory"], HOLD_FOR_EVER, str(broker.path))
    assert mallory.stdout.readline().strip() == "granted 1 1"
    flood = as_student(students["mallory"], """
        import os, socket, sys
        answers = []
        def ask(forged=b""):
            connection = socket.socket(socket.AF_UNIX)
            connection.connect(sys.argv[1])
            if forged:
                try:
                    connection.sendall(forged)
                except BrokenPipeError:  # refused already
                    pass
            answers.append(connection.recv(100).decode().strip())
            connection.close()
        for _ in range(100):
            ask()
        for _ in range(50):
            ask(b"granted 1 1\\nqueued 0 1\\nuid 0\\n")
        for _ in range(50):  # children: other processes, the same user
            if os.fork() == 0:
                ask()
                os._exit(0 if answers[-1] == "refused" else 1)
            assert os.wait()[1] == 0
        try:
            open(os.path.join(os.path.dirname(sys.argv[1]), "wait-0000"), "w")
        except OSError as error:
            answers.append(type(error).__name__)
        print(sorted(set(answers)), len(answers))
    """, str(broker.path))
    try:
        out, err = flood.communicate(timeout=60)
        assert out.strip() == "['PermissionError', 'refused'] 151", out + err
        assert set(broker.tickets) == {students["mallory"].uid}  # one ticket for her, whatever she sent
        said, held, seconds = anns_lab(students, broker)
        assert said[0] == WAITING and said[1].startswith(GOT) and len(said) == 2
        assert held and seconds < 1.0 + 0.5
    finally:
        stop(mallory)


def test_a_grant_ends_when_the_process_that_asked_dies(students, start_broker):
    """Mallory's process takes the slot and forks a child that keeps the connection open, then dies: the grant is the
    dead process's, so Ann has the slot at once, long before the hold (60 s) would end it."""
    broker = start_broker(max_hold=60)
    mallory = as_student(students["mallory"], """
        import os, socket, sys, time
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(sys.argv[1])
        print(connection.recv(100).decode().strip(), flush=True)
        if os.fork() == 0:  # the child keeps the granted connection open, for ever
            time.sleep(3600)
        time.sleep(3600)
    """, str(broker.path), start_new_session=True)
    try:
        assert mallory.stdout.readline().strip() == "granted 1 60"
        assert broker.holder_pids == {mallory.pid}  # setpriv and env exec: the process that asked
        lab = as_student(students["ann"], ANNS_LAB, str(broker.path), "0.2", "30")
        wait_for(lambda: len(broker.tickets) == 2)  # Ann waits behind Mallory
        os.kill(mallory.pid, signal.SIGKILL)
        out, err = lab.communicate(timeout=30)
        assert out.splitlines()[0] == WAITING and out.splitlines()[-1].startswith("held True"), out + err
        assert float(out.split()[-1]) < 5
    finally:
        os.killpg(mallory.pid, signal.SIGKILL)
        mallory.wait()


def test_a_second_ticket_of_the_same_user_is_refused_and_her_lab_waits_for_her_other_one(students, start_broker):
    broker = start_broker(max_hold=60)
    other_training = as_student(students["ann"], HOLD_FOR_EVER, str(broker.path))
    try:
        assert other_training.stdout.readline().strip() == "granted 1 60"
        lab = as_student(students["ann"], ANNS_LAB, str(broker.path), "0.2", "0.5")  # a stalled queue's cap: 0.5 s
        time.sleep(1.5)
        assert lab.poll() is None  # still waiting for her other one, past the cap: never trains without a slot
    finally:
        stop(other_training)
    out, err = lab.communicate(timeout=30)
    said = out.splitlines()
    assert said[0] == ("Another training of yours holds your place in the queue: this one waits for it to end, then "
                       "takes its turn") and said[1].startswith(GOT) and len(said) == 3, out + err
    assert said[2].startswith("held True") and 1.5 < float(said[2].split()[-1]) < 1.5 + 3, out
    said, held, seconds = anns_lab(students, broker)  # nothing of hers left: her turn at once
    assert said == [] and held and seconds < 1.0


def test_the_boost_follows_the_grants_and_a_stopped_server_leaves_no_weight(students, start_broker):
    """Mallory's server (here: a process as her, in her classroom cgroup, made as the spawner makes it) starts a
    process that holds a slot and outlives the server; the boost weighs her cgroup while the broker grants her the
    slot, and the spawner's stop kills the holder, so that the slot and the weight go back."""
    from jupyterhub.spawner import set_user_setuid
    name = students["mallory"].name
    if not spawner.UserCgroup(name).prepare(None, 1.0, 64):
        pytest.skip("no cgroup with a CPU controller here")
    preexec = spawner.limited_preexec(name, set_user_setuid(name), None, 1.0, 64, None)
    boost = CpuShares(training_weight=700)
    broker = start_broker(max_hold=60, boost=boost)
    server = subprocess.Popen(
        [SYSTEM_PYTHON, "-c", textwrap.dedent("""
            import socket, subprocess, sys, time
            subprocess.Popen([sys.executable, "-c",  # the holder, in a session of its own: it outlives the server
                              "import socket, sys, time\\n"
                              "c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])\\n"
                              "print(c.recv(100).decode().strip(), flush=True); time.sleep(3600)", sys.argv[1]],
                             start_new_session=True)
            time.sleep(3600)
        """), str(broker.path)], preexec_fn=preexec, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert server.stdout.readline().strip() == "granted 1 60"
        holder = next(iter(broker.holder_pids))
        cgroup = user_cgroup(holder)
        assert cgroup is not None and cgroup.name == name
        wait_for(lambda: cpu_weight(cgroup) == 700)
        server_spawner = spawner.ClassroomSpawner(user=SimpleNamespace(name=name, url=f"/user/{name}/",
                                                                        escaped_name=name))
        server_spawner.pid, server_spawner.proc = server.pid, server
        asyncio.run(server_spawner.stop(now=True))
        wait_for(lambda: dead(holder))  # the holder died with the server
        wait_for(lambda: broker.holder_pids == set() and cpu_weight(cgroup) == DEFAULT_WEIGHT)
        assert boost.boosted == set()
    finally:
        spawner.UserCgroup(name).remove()
        server.kill()
        server.wait()
