"""The Validate button's request, served by the course's server extension (rlhf_course/classroom/validate_extension.py),
on a real Jupyter server: the answer is nbgrader's JSON from the patient Validator; while it runs, the server
still answers (nbgrader's own handler blocks it for the whole Validate) and the status endpoint says, in both
languages, that Validate is running; an endless loop comes back as a failure that names it; on the hub, it waits
its turn in the class's Validate queue, saying its place.  About 25 s."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from rlhf_course.classroom import patient_validate
from rlhf_course.i18n import CHINESE, ZH
from tests.support.course import REPO

TOKEN = "validate-extension-test"
TEST_CELL = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                          "locked": True, "schema_version": 3}}


def notebook(folder: Path, name: str, solution: str) -> Path:
    nb = new_notebook(cells=[new_code_cell(solution), new_code_cell("assert answer() == 42", metadata=TEST_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, body: dict | None = None, timeout: float = 120) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Authorization": f"token {TOKEN}",
                                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as reply:
        return json.loads(reply.read())


@contextlib.contextmanager
def running_server(tmp_path: Path, extra_env: dict[str, str]):
    """A Jupyter server with the course's Validate, its notebooks in tmp_path/work, ``extra_env`` in its
    environment; its base URL and notebooks' folder."""
    work, config = tmp_path / "work", tmp_path / "config"
    work.mkdir()
    config.mkdir()
    (config / "nbgrader_config.py").write_text(  # what the students' config would say, short for a test
        "c = get_config()\nc.PatientExecute.cpu_seconds = 2\nc.PatientExecute.notice_seconds = 1\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_PATH=str(config), JUPYTER_CONFIG_DIR=str(tmp_path / "user"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    env.update(extra_env)
    (config / "jupyter_server_config.d").mkdir()  # the course's server extensions, as make lab and make hub install them
    shutil.copy2(REPO / "jupyter" / "server" / "rlhf_course.json", config / "jupyter_server_config.d")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}", "--allow-root"],
        env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            request(f"{url}/api/status", timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail((tmp_path / "server.log").read_text()[-3000:])
            time.sleep(0.3)
    try:
        yield url, work
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def server(tmp_path):
    with running_server(tmp_path, {}) as started:
        yield started


def test_validate_answers_nbgrader_json_and_says_meanwhile_that_it_runs(server):
    url, work = server
    notebook(work, "slow", "import time\ntime.sleep(4)\ndef answer():\n    return 42\n")
    notebook(work, "endless", "while True:\n    pass\ndef answer():\n    return 42\n")
    answers, statuses, latencies = {}, [], []

    def validate(name):
        answers[name] = request(f"{url}/assignments/validate", {"path": f"{name}.ipynb"})

    runs = [threading.Thread(target=validate, args=(name,)) for name in ("slow", "endless")]
    for run in runs:
        run.start()
    while any(run.is_alive() for run in runs):
        began = time.monotonic()
        statuses.append(request(f"{url}/rlhf-course/validate-status", timeout=10))
        latencies.append(time.monotonic() - began)
        time.sleep(0.3)
    for run in runs:
        run.join()
    assert answers["slow"] == {"success": True, "value": {}}, answers["slow"]  # nbgrader's "passes all the tests"
    stopped, test = answers["endless"]["value"]["failed"]
    assert "endless loop" in " ".join(stopped["raw_error"].split()) and "NameError" in test["raw_error"]
    running = patient_validate.STILL_COMPUTING.split("{")[0]
    said = [status for status in statuses if status["busy"] and status["text"]["en"].startswith(running)]
    assert said, statuses
    assert said[0]["text"][CHINESE].startswith(ZH[patient_validate.STILL_COMPUTING].split("{")[0]), said[0]
    assert max(latencies) < 5, latencies  # the server answers while a Validate runs
    assert not request(f"{url}/rlhf-course/validate-status")["busy"]
    from rlhf_course.classroom.validate_extension import KERNEL_STARTING
    said = request(f"{url}/rlhf-course/messages")["kernel_starting"]  # what the labextension shows
    assert said == {"en": KERNEL_STARTING, CHINESE: ZH[KERNEL_STARTING]}


def test_validate_waits_its_turn_in_the_class_queue_saying_so_then_runs(tmp_path):
    """The server's Validate asks the hub's queue (RLHF_VALIDATE_QUEUE) for its turn as the server's own process:
    while another account holds the only slot, it waits and its status says its place in both languages; then it
    runs and answers as usual."""
    from rlhf_course.classroom.training_broker import SlotBroker
    from rlhf_course.classroom.validate_queue import WAITING_TURN
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("another account holding the slot needs root and setpriv")
    folder = Path(tempfile.mkdtemp(prefix="vq-"))  # a short path: a socket's is at most 107 bytes
    folder.chmod(0o755)
    broker = SlotBroker(folder / "broker.sock", 1, 600, name="validate-broker").start()
    holder = subprocess.Popen(  # nobody, holding the one slot until its stdin closes
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
         "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
         "print(s.recv(100).decode().strip(), flush=True)\nsys.stdin.read()", str(broker.path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("granted 1 600")
        with running_server(tmp_path, {"RLHF_VALIDATE_QUEUE": str(broker.path)}) as (url, work):
            notebook(work, "quick", "def answer():\n    return 42\n")
            answers = {}
            run = threading.Thread(target=lambda: answers.update(
                request(f"{url}/assignments/validate", {"path": "quick.ipynb"})))
            run.start()
            deadline = time.monotonic() + 60
            while not (status := request(f"{url}/rlhf-course/validate-status", timeout=10))["busy"]:
                assert time.monotonic() < deadline, status
                time.sleep(0.2)
            assert status["text"] == {"en": WAITING_TURN.format(ahead=0, slots=1),
                                      CHINESE: ZH[WAITING_TURN].format(ahead=0, slots=1)}
            time.sleep(1)
            assert run.is_alive() and not answers  # no verdict while it waits, however long
            holder.stdin.close()  # the holder's Validate is over: this one's turn
            run.join(120)
            assert answers == {"success": True, "value": {}}, answers
            deadline = time.monotonic() + 10
            while broker.tickets:  # its turn given back
                assert time.monotonic() < deadline, broker.tickets
                time.sleep(0.05)
    finally:
        holder.kill()
        holder.wait()
        broker.stop()
        shutil.rmtree(folder, ignore_errors=True)
