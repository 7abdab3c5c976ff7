"""Every wait says what it waits for, in the student's JupyterLab (headless Chromium): while Validate runs a slow
cell, the course's labextension writes in the toolbar of nbgrader's Validate button what the course's Validate is doing
(rlhf_course/classroom/validate_extension.py); a notebook whose kernel takes seconds to start says, in its
toolbar, that the kernel is still starting because the class is busy, and says nothing more once it has started.
This checkout's labextension build and server extension are the ones served (not the environment's copies).
About 40 s."""
import json
import shutil
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from rlhf_course.classroom import patient_validate
from rlhf_course.classroom.validate_extension import KERNEL_STARTING
from tests.support.browser import LabServer
from tests.support.course import REPO

TEST_CELL = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                          "locked": True, "schema_version": 3}}
SLOW_START = 8  # seconds the slow kernel sleeps before it starts: longer than the labextension's quiet 5 s


def notebook(path, source: str, kernel: str = "python3") -> None:
    nb = new_notebook(cells=[new_code_cell(source), new_code_cell("assert answer() == 42", metadata=TEST_CELL)])
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def lab(tmp_path):
    home, data, config = tmp_path / "student", tmp_path / "data", tmp_path / "config"
    home.mkdir()
    # this checkout's labextension and a kernel that takes SLOW_START seconds to start, ahead of the environment's
    shutil.copytree(REPO / "jupyter" / "labextension" / "rlhf-course-deadlines",
                    data / "labextensions" / "rlhf-course-deadlines")
    (data / "kernels" / "slow").mkdir(parents=True)
    (data / "kernels" / "slow" / "kernel.json").write_text(json.dumps({
        "argv": ["sh", "-c", f"sleep {SLOW_START}; exec {sys.executable} -m ipykernel_launcher -f \"$0\"",
                 "{connection_file}"], "display_name": "slow", "language": "python"}))
    (config / "jupyter_server_config.d").mkdir(parents=True)
    shutil.copy2(REPO / "jupyter" / "server" / "rlhf_course.json", config / "jupyter_server_config.d")
    (config / "nbgrader_config.py").write_text("c = get_config()\nc.PatientExecute.notice_seconds = 1\n")
    notebook(home / "slow_cell.ipynb", "import time\ntime.sleep(6)\ndef answer():\n    return 42\n")
    notebook(home / "slow_kernel.ipynb", "def answer():\n    return 42\n", kernel="slow")
    server = LabServer(home, tmp_path, env_extra={"HOME": str(home), "JUPYTER_PATH": str(data)},
                       disabled_extensions=("@jupyterlab/mathjax-extension",))
    yield server
    server.stop()


@pytest.mark.slow
def test_validate_and_a_slow_kernel_start_say_what_they_wait_for(lab, browser, artifacts):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(lab.url("lab/tree/slow_cell.ipynb"))
    panel = page.locator(".jp-NotebookPanel", has=page.locator(".jp-Notebook"))
    panel.get_by_role("button", name="Validate").click(timeout=60_000)
    note = page.locator(".jp-NotebookPanel-toolbar > .rlhf-wait-validate")  # in the toolbar of nbgrader's button
    running = patient_validate.STILL_COMPUTING.split("{")[0].strip()
    note.filter(has_text=running).wait_for(timeout=180_000)
    page.screenshot(path=str(artifacts / "validate_says_it_runs.png"))
    page.locator(".jp-Dialog").get_by_text("Success! Your notebook passes all the tests.").wait_for(timeout=120_000)
    note.wait_for(state="hidden", timeout=10_000)  # said while it ran, gone at the next look once it answered
    page.keyboard.press("Escape")

    page.goto(lab.url("lab/tree/slow_kernel.ipynb"))
    starting = page.locator(".jp-NotebookPanel-toolbar > .rlhf-wait-kernel")
    starting.filter(has_text=KERNEL_STARTING).wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "kernel_still_starting.png"))
    starting.wait_for(state="hidden", timeout=120_000)  # the kernel started: nothing left to say
