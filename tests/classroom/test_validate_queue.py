"""The class's Validate queue (rlhf_course/classroom/validate_queue.py): the server's Validate takes its turn from a
real broker (rlhf_course/classroom/training_broker.py's SlotBroker, in this process) before it starts a kernel,
says its place in both languages through the status the labextension shows, runs K at a time at most, never fails
for waiting (no broker, a hold that ends), and waits for the student's own other request rather than run without a
turn; a student asking in a loop takes tickets at the broker's rate at most.  In-process: the students are told
apart by the uid the broker reads from each connection, given here per connection (a real account each:
test_training_broker.py); the Validates are the server's handler's own method, with a fake notebook run where the
verdict is not the point.  About 8 s (two real Validates)."""
from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from rlhf_course.classroom import training_broker, validate_extension
from rlhf_course.classroom.hub import Classroom, parse_arguments
from rlhf_course.classroom.server_env import ServerEnv
from rlhf_course.classroom.training_broker import SlotBroker
from rlhf_course.classroom.validate_extension import STARTING, PatientValidateHandler, ValidateStatus
from rlhf_course.classroom.validate_queue import REFUSED, WAITING_TURN, ValidateQueue, validate_turn
from rlhf_course.i18n import CHINESE, ENGLISH, ZH
from rlhf_course.lab.threads import usable_cpus
from tests.support.course import REPO
from tests.support.sockets import assert_a_socket_of_roots

TEST_CELL = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                          "locked": True, "schema_version": 3}}


@pytest.fixture
def students(monkeypatch):
    """Each connection to a broker is a student of its own (a new uid), or of ``["uid"]`` once set (one student)."""
    uids, chosen = itertools.count(50_000), {}
    monkeypatch.setattr(training_broker, "peer_credentials",
                        lambda connection: (os.getpid(), chosen.get("uid") or next(uids), 0))
    return chosen


@pytest.fixture
def start_broker():
    folders, brokers = [], []

    def start(slots: int, max_hold: float = 600.0, on_holders=None, **rates) -> SlotBroker:
        folders.append(tempfile.TemporaryDirectory(prefix="vq-"))  # a short path: a socket's is at most 107 bytes
        brokers.append(SlotBroker(Path(folders[-1].name) / "broker.sock", slots, max_hold, on_holders,
                                  name="validate-broker", **rates).start())
        return brokers[-1]
    yield start
    for broker in brokers:
        broker.stop()
    for folder in folders:
        folder.cleanup()


def wait_until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def server_handler(root: Path, queue: ValidateQueue | None) -> SimpleNamespace:
    """What the Validate handler's ``validate_notebook`` reads of its server: its folder, status, queue, config."""
    config = Config({"PatientExecute": {"cpu_seconds": 20, "notice_seconds": 1}})
    return SimpleNamespace(root_dir=str(root), status=ValidateStatus(), validate_queue=queue,
                           log=logging.getLogger("validate-queue-test"), load_config=lambda: config)


class FakeValidator:
    """A Validate's run that lasts until ``release`` is set, counting how many run at once."""
    running, most_at_once, lock = 0, 0, threading.Lock()
    release = threading.Event()
    told_restored = False
    language = "en"  # the notebook's edition's, as PatientValidator says once it has run

    def __init__(self, config=None, on_wait=None):
        pass

    def validate(self, path):
        with FakeValidator.lock:
            FakeValidator.running += 1
            FakeValidator.most_at_once = max(FakeValidator.most_at_once, FakeValidator.running)
        try:
            FakeValidator.release.wait(10)
            return {}
        finally:
            with FakeValidator.lock:
                FakeValidator.running -= 1


@pytest.fixture
def fake_validator(monkeypatch):
    FakeValidator.running, FakeValidator.most_at_once = 0, 0
    FakeValidator.release = threading.Event()
    monkeypatch.setattr(validate_extension, "PatientValidator", FakeValidator)
    yield FakeValidator
    FakeValidator.release.set()


def said_text(status: ValidateStatus) -> dict:
    return status.as_json()["text"]


def test_the_queue_keeps_arrival_order_and_each_waiter_sees_its_place_in_both_languages(students, start_broker):
    broker = start_broker(slots=1)
    queue = ValidateQueue(broker.path)
    statuses = {name: ValidateStatus() for name in ("ann", "ben", "cai")}
    leave = {name: threading.Event() for name in statuses}
    order = []

    def validate(name):
        with queue.turn(statuses[name].say) as held:
            order.append((name, held))
            leave[name].wait(10)

    threads = {name: threading.Thread(target=validate, args=(name,)) for name in statuses}
    for name in ("ann", "ben", "cai"):  # one after the other: the broker's order is arrival
        threads[name].start()
        wait_until(lambda: name in dict(order) or statuses[name].as_json()["busy"])
    assert order == [("ann", True)]
    assert said_text(statuses["ben"]) == {
        ENGLISH: WAITING_TURN.format(ahead=0, slots=1),
        CHINESE: "Validate 正在排队：全班的队列中你前面还有 0 个（本机同时最多运行 1 个 Validate）；"
                 "你的笔记本没有问题。"}
    assert said_text(statuses["cai"]) == {ENGLISH: WAITING_TURN.format(ahead=1, slots=1),
                                          CHINESE: ZH[WAITING_TURN].format(ahead=1, slots=1)}
    leave["ann"].set()  # ann's Validate is over: ben's turn, and cai moves up
    wait_until(lambda: len(order) == 2)
    assert order[1] == ("ben", True)
    wait_until(lambda: "0 ahead" in said_text(statuses["cai"])[ENGLISH])
    assert "你前面还有 0 个" in said_text(statuses["cai"])[CHINESE]
    leave["ben"].set()
    wait_until(lambda: len(order) == 3)
    leave["cai"].set()
    for thread in threads.values():
        thread.join(10)
    assert order == [("ann", True), ("ben", True), ("cai", True)]
    wait_until(lambda: not broker.tickets)  # every turn given back


def test_k_validates_run_at_once_at_most_the_next_one_says_it_waits_then_runs(students, start_broker, fake_validator,
                                                                            tmp_path):
    broker = start_broker(slots=1)
    (tmp_path / "lab.ipynb").write_text("{}")
    first, second = (server_handler(tmp_path, ValidateQueue(broker.path)) for _ in range(2))
    answers = {}

    def validate(name, handler):
        answers[name] = PatientValidateHandler.validate_notebook(handler, "lab.ipynb")

    runs = [threading.Thread(target=validate, args=(name, handler)) for name, handler in (("first", first),
                                                                                          ("second", second))]
    runs[0].start()
    wait_until(lambda: fake_validator.running == 1)
    assert said_text(first.status)[ENGLISH] == STARTING.format(notebook="lab.ipynb")  # granted: its kernel starts
    runs[1].start()
    wait_until(lambda: second.status.as_json()["busy"])
    assert said_text(second.status) == {ENGLISH: WAITING_TURN.format(ahead=0, slots=1),
                                        CHINESE: ZH[WAITING_TURN].format(ahead=0, slots=1)}
    time.sleep(0.3)
    assert fake_validator.running == 1  # the second waits while the first runs
    fake_validator.release.set()
    for run in runs:
        run.join(10)
    assert answers == {"first": {"success": True, "value": {}}, "second": {"success": True, "value": {}}}
    assert fake_validator.most_at_once == 1
    wait_until(lambda: not broker.tickets)  # both turns given back


def test_without_a_broker_validate_runs_at_once(fake_validator, tmp_path):
    (tmp_path / "lab.ipynb").write_text("{}")
    fake_validator.release.set()
    for queue in (None, ValidateQueue(tmp_path / "no-broker.sock")):
        handler = server_handler(tmp_path, queue)
        said = []
        handler.status.say = lambda english, fields=None: said.append(english)
        started = time.monotonic()
        assert PatientValidateHandler.validate_notebook(handler, "lab.ipynb") == {"success": True, "value": {}}
        assert said == [STARTING] and time.monotonic() - started < 2, queue
    with validate_turn(None, pytest.fail) as held:
        assert held is False


def test_a_refused_validate_waits_for_her_other_request_says_so_in_both_languages_then_takes_its_turn(
        students, start_broker, fake_validator, tmp_path):
    """Her other request (a connection she holds from a shell) holds her one ticket: her Validate is refused, says
    so, starts no kernel while the other lives, and runs in a turn of its own once it is given back."""
    (tmp_path / "lab.ipynb").write_text("{}")
    fake_validator.release.set()
    broker = start_broker(slots=2)  # a free slot: only her own ticket stands in the way
    students["uid"] = 50_500
    holder = ValidateQueue(broker.path).turn(lambda *_: pytest.fail("a free slot: nothing to wait for"))
    assert holder.__enter__() is True
    handler = server_handler(tmp_path, ValidateQueue(broker.path, retry_seconds=0.05))
    holders, answer = [], {}
    broker.on_holders = holders.append
    validate = threading.Thread(target=lambda: answer.update(
        PatientValidateHandler.validate_notebook(handler, "lab.ipynb")))
    validate.start()
    try:
        wait_until(lambda: handler.status.as_json()["busy"])
        assert said_text(handler.status) == {
            ENGLISH: REFUSED,
            CHINESE: "你的另一个 Validate 占着你在全班队列中的位置：本次 Validate 等它结束后再排队；你的笔记本没有问题。"}
        time.sleep(0.5)  # ten asks again, each refused
        assert fake_validator.running == 0 and not answer
    finally:
        holder.__exit__(None, None, None)
    validate.join(5)
    assert answer == {"success": True, "value": {}}
    assert holders[:2] == [set(), {os.getpid()}]  # the other's turn given back, then hers granted: it ran in a turn


FLOOD = """
import socket, sys, time
answers, end = [], time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(sys.argv[1])
    answers.append(connection.recv(100).decode().split(" ")[0].strip())
    connection.close()
print(answers.count("granted") + answers.count("queued"), answers.count("refused"), len(answers))
"""


def test_a_student_asking_in_a_loop_takes_tickets_at_the_brokers_rate_and_a_classmate_is_answered(monkeypatch,
                                                                                                  start_broker):
    """Mallory (another process: another uid) connects, reads the answer and closes, in a loop, for 1.5 s, with a
    slot free all along for the classmate (two slots; Mallory holds one ticket at most, for a moment): the broker takes her tickets at ``ask_rate`` (burst 3, 2 a second: 6 at most), refuses
    every other, at ``refusal_rate`` at most (300 a second: her loop waits in the backlog the rest of the time), and
    answers a classmate who asks meanwhile within a second (milliseconds on a quiet machine)."""
    real_credentials = training_broker.peer_credentials

    def credentials(connection):
        pid, _, gid = real_credentials(connection)
        return pid, 50_900 if pid == os.getpid() else 50_901, gid
    monkeypatch.setattr(training_broker, "peer_credentials", credentials)
    broker = start_broker(slots=2, ask_rate=2.0, ask_burst=3, refusal_rate=300.0)
    flood = subprocess.Popen([sys.executable, "-c", FLOOD, str(broker.path), "1.5"], stdout=subprocess.PIPE,
                             text=True)
    time.sleep(0.5)
    answers = []
    for _ in range(3):  # the classmate, mid-flood (her own burst: a fourth at once would wait for her rate)
        started = time.monotonic()
        with ValidateQueue(broker.path).turn(say=pytest.fail) as held:
            answers.append((held, time.monotonic() - started))
    tickets, refused, asked = map(int, flood.communicate(timeout=30)[0].split())  # a ticket: granted, or queued
    assert 3 <= tickets <= 3 + 2 * 1.5 + 1, (tickets, refused, asked)
    assert refused == asked - tickets and 10 * tickets < refused <= 300 * 1.5 + 2 * training_broker.LISTEN_BACKLOG
    assert all(held for held, _ in answers) and max(seconds for _, seconds in answers) < 1.0, answers
    assert set(broker.tickets) <= {50_901}  # nothing of the classmate's left; of Mallory's, one at most


def test_the_brokers_rate_of_asking_is_positive():
    with pytest.raises(ValueError, match="positive rates of asking and refusing and a burst of one at least, not "
                                         "0, 1000.0 and 3"):
        SlotBroker(Path("unused.sock"), 1, ask_rate=0, ask_burst=3)


def test_a_validate_that_breaks_gives_its_turn_back(students, start_broker, monkeypatch, tmp_path):
    class BrokenValidator:
        def __init__(self, config=None, on_wait=None):
            pass

        def validate(self, path):
            raise RuntimeError("the notebook is not JSON")

    monkeypatch.setattr(validate_extension, "PatientValidator", BrokenValidator)
    broker = start_broker(slots=1)
    (tmp_path / "lab.ipynb").write_text("{}")
    answer = PatientValidateHandler.validate_notebook(server_handler(tmp_path, ValidateQueue(broker.path)), "lab.ipynb")
    assert answer["success"] is False and "RuntimeError: the notebook is not JSON" in answer["value"]
    wait_until(lambda: not broker.tickets)  # the next in the queue is not kept waiting


def notebook(folder: Path, name: str, solution: str) -> str:
    nb = new_notebook(cells=[new_code_cell(solution), new_code_cell("assert answer() == 42", metadata=TEST_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")
    return f"{name}.ipynb"


def test_a_turn_that_ends_mid_validate_lets_it_finish_and_a_real_failure_still_reads_as_one(students, start_broker,
                                                                                           tmp_path):
    holders = []
    broker = start_broker(slots=1, max_hold=0.5, on_holders=holders.append)
    handler = server_handler(tmp_path, ValidateQueue(broker.path))
    slow = notebook(tmp_path, "slow", "import time\ntime.sleep(1.5)\ndef answer():\n    return 42\n")
    started = time.monotonic()
    assert PatientValidateHandler.validate_notebook(handler, slow) == {"success": True, "value": {}}
    assert time.monotonic() - started > 1.5  # so the hold (0.5 s) ended while it ran
    assert holders[0] == {os.getpid()} and holders[1] == set()  # granted, then ended by the broker, not failed
    wrong = notebook(tmp_path, "wrong", "def answer():\n    return 41\n")
    failed = PatientValidateHandler.validate_notebook(handler, wrong)
    assert failed["success"] is True and "AssertionError" in failed["value"]["failed"][0]["raw_error"], failed
    wait_until(lambda: not broker.tickets)  # every turn given back


# -- the hub's wiring (no hub: the classroom's own methods, as tests/classroom/test_training_queue_setup.py does) --

def classroom(tmp_path, **kwargs):
    return Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path(sys.executable), **kwargs)


def test_every_server_is_given_the_validate_queue_and_the_hub_says_its_k(tmp_path):
    room = classroom(tmp_path)
    socket_path = tmp_path / "base" / "validate-queue" / "broker.sock"
    assert room.validate_slots == max(1, usable_cpus())
    assert room.validate_queue_env() == {"RLHF_VALIDATE_QUEUE": str(socket_path)}
    assert ValidateQueue.from_environment(room.validate_queue_env()) == ValidateQueue(socket_path)
    room.server = ServerEnv.__new__(ServerEnv)
    room.server.python, room.server.path = sys.executable, os.environ["PATH"]
    room.course_id, room.passwords, room.hub_dir = "c", {name: "p" for name in room.names}, tmp_path
    room.write_hub_config()
    environments = json.loads((tmp_path / "users.json").read_text())["environments"]
    assert {env["RLHF_VALIDATE_QUEUE"] for env in environments.values()} == {str(socket_path)}
    assert f"Validates running at once: {room.validate_slots} " in room.summary()
    off = classroom(tmp_path, validate_slots=0)  # --validate-slots 0: no queue, no broker
    off.passwords = room.passwords
    assert off.validate_queue_env() == {} and "(no Validate queue)" in off.summary()
    off.start_validate_broker()
    assert off.validate_broker is None


def test_the_validate_slots_option_and_make_variable(capsys):
    assert parse_arguments(["--proxy", "/bin/true"]).validate_slots is None  # the classroom's default: the cores
    assert parse_arguments(["--proxy", "/bin/true", "--validate-slots", "0"]).validate_slots == 0
    with pytest.raises(SystemExit):
        parse_arguments(["--proxy", "/bin/true", "--validate-slots", "-1"])
    assert "--validate-slots: a number of slots, 0 or more, not -1" in capsys.readouterr().err
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed-stamp", "-o",
                          ".cache/hub-proxy/node_modules/.bin/configurable-http-proxy", "hub", "HUB_STUDENTS=a",
                          "HUB_VALIDATE_SLOTS=3"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "--validate-slots 3" in " ".join(dry.replace("\\\n", " ").split())


def test_the_hub_runs_the_validate_broker_on_a_socket_of_roots_and_stops_it(tmp_path, socket_base):
    room = Classroom(tmp_path, socket_base, "p_", ["a"], 1, Path(sys.executable), validate_slots=2)
    room.start_validate_broker()
    socket_path = room.validate_broker_socket
    assert_a_socket_of_roots(socket_path)
    assert (room.validate_broker.slots, room.validate_broker.max_hold) == (2, 600)
    queue = ValidateQueue.from_environment(room.validate_queue_env())
    with queue.turn(say=pytest.fail) as held:
        assert held is True
    room.remove()  # not created: only the brokers (and nothing else) are stopped
    assert not socket_path.exists()
    with queue.turn(say=pytest.fail) as held:
        assert held is False  # no broker any more: Validate runs at once
