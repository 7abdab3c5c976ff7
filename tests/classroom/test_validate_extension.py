"""The Validate button's request, served by the course's server extension (rlhf_course/classroom/validate_extension.py),
on a real Jupyter server: the answer is nbgrader's JSON from the patient Validator; while it runs, the server
still answers (nbgrader's own handler blocks it for the whole Validate) and the status endpoint says, in both
languages, that Validate is running; an endless loop comes back as a failure that names it.  About 15 s."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
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


@pytest.fixture
def server(tmp_path):
    """A Jupyter server with the course's Validate, its notebooks in tmp_path/work; its base URL."""
    work, config = tmp_path / "work", tmp_path / "config"
    work.mkdir()
    config.mkdir()
    (config / "nbgrader_config.py").write_text(  # what the students' config would say, short for a test
        "c = get_config()\nc.PatientExecute.cpu_seconds = 2\nc.PatientExecute.notice_seconds = 1\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_PATH=str(config), JUPYTER_CONFIG_DIR=str(tmp_path / "user"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
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
    yield url, work
    process.terminate()
    process.wait(timeout=30)


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
