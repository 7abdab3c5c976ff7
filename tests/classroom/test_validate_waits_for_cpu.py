"""Validate on a saturated machine waits for correct work and still stops a runaway cell
(rlhf_course/classroom/patient_validate.py).

The machine is made busy for real, not mocked: each notebook's first cell moves its kernel into a cgroup whose CPU
quota is a few percent of a core (what a student's kernel gets when a class shares two cores), so a cell that
computes 0.15 CPU-seconds takes at least 3 s of wall time.  Stock Validate (nbgrader's Execute, a 2 s wall-clock
limit) fails such a notebook; the course's Validate (a 2 CPU-second limit) passes it, saying meanwhile that it
waits.  An endless loop still reaches the CPU limit and is reported as one; a cell that sleeps forever reaches
the blocked limit.  About 25 s on a loaded two-core machine (three Python processes starting; 0.5 CPU-s of
work in all, the rest waiting).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from rlhf_course.classroom import patient_validate
from rlhf_course.classroom.patient_validate import PatientValidator, tree_usage
from rlhf_course.classroom.spawner import UserCgroup
from rlhf_course.i18n import CHINESE, ZH

LIMIT = 2  # seconds: stock Validate's wall-clock limit, the course's CPU-second limit
WORK = 0.15  # CPU-seconds the cell defining the function computes
QUOTA = 0.05  # cores the kernels' cgroup may use: the cell's WORK takes at least WORK / QUOTA = 3 s
TEST_CELL = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                          "locked": True, "schema_version": 3}}


def enter_cgroup(procs: list[Path]) -> str:
    return "import os\n" + "".join(f"open({str(p)!r}, 'w').write(str(os.getpid()))\n" for p in procs)


def write_notebook(folder: Path, name: str, procs: list[Path], solution: str, edition: str | None = None) -> Path:
    nb = new_notebook(cells=[new_code_cell(enter_cgroup(procs)), new_code_cell(solution),
                             new_code_cell("assert ppo_loss() == 42", metadata=TEST_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if edition:
        nb.metadata["rlhf_course"] = {"edition": edition}
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


CORRECT_BUT_SLOW = f"""import time
began = time.process_time()
while time.process_time() - began < {WORK}:  # {WORK} CPU-seconds, however long the quota makes them
    pass
def ppo_loss():
    return 42
"""
ENDLESS = "while True:\n    pass\ndef ppo_loss():\n    return 42\n"
SLEEPS = "import time\ntime.sleep(3600)\ndef ppo_loss():\n    return 42\n"


@pytest.fixture
def capped_cgroup():
    """The ``cgroup.procs`` files of a fresh cgroup capped at QUOTA cores (removed afterwards)."""
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    cgroup = UserCgroup(f"validate-test-{uuid.uuid4().hex[:8]}")
    procs = cgroup.prepare(None, QUOTA, None)
    if not procs:
        pytest.skip("root may make no cgroup here (a container)")
    yield procs
    cgroup.remove()


def config(**patient) -> Config:
    return Config({"PatientExecute": {"cpu_seconds": LIMIT, "notice_seconds": 2, "poll_seconds": 0.2, **patient}})


def validate(path: Path, command: list[str]) -> subprocess.Popen:
    """Validate ``path`` in a process of its own (nbgrader's Validator sets process-wide variables).

    Its kernel listens on Unix sockets of its own, as the classroom's do (rlhf_course/classroom/hub.py): over TCP,
    three kernels starting at once beside the other test worker could find the loopback port jupyter_client chose
    taken before the kernel bound it."""
    sockets = f"/tmp/rlhf-test-kernel-{uuid.uuid4().hex[:12]}-ipc"
    return subprocess.Popen([*command, "--KernelManager.transport=ipc", f"--KernelManager.ip={sockets}", path.name],
                            cwd=path.parent, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


PATIENT = [sys.executable, "-m", "rlhf_course.classroom.patient_validate", f"--PatientExecute.cpu_seconds={LIMIT}",
           "--PatientExecute.notice_seconds=1"]
STOCK = ["nbgrader", "validate", f"--Execute.timeout={LIMIT}"]
PASSES = "Success! Your notebook passes all the tests."


def test_a_saturated_classroom_waits_instead_of_failing(capped_cgroup, tmp_path):
    """Two of the course's Validates and one stock Validate at once, their kernels sharing one capped cgroup."""
    paths = [write_notebook(tmp_path, f"student{i}", capped_cgroup, CORRECT_BUT_SLOW) for i in range(3)]
    runs = [validate(path, PATIENT) for path in paths[:2]] + [validate(paths[2], STOCK)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    still_running = patient_validate.STILL_RUNNING.split("{")[0]
    for out in outputs[:2]:
        assert PASSES in out, out[-3000:]
        assert still_running in out, out[-3000:]  # and it said, meanwhile, that it was waiting
    # the same notebook, the same load, nbgrader's wall-clock limits: the correct cell timed out
    assert PASSES not in outputs[2] and "Timeout waiting for" in outputs[2], outputs[2][-3000:]


def test_an_endless_loop_is_stopped_and_says_so(capped_cgroup, tmp_path):
    path = write_notebook(tmp_path, "endless", [], ENDLESS)  # its kernel uncapped: the loop reaches the limit fast
    result = PatientValidator(config=config(cpu_seconds=1)).validate(str(path))
    stopped, test = result["failed"]
    said = " ".join(stopped["raw_error"].split())
    assert said.startswith("CellStopped: Stopped: this cell computed for") and "endless loop" in said, said
    assert "NameError" in test["raw_error"], test  # what follows fails as it would after any error


def test_a_cell_that_sleeps_forever_is_stopped_in_its_edition_language(tmp_path):
    path = write_notebook(tmp_path, "sleeps", [], SLEEPS, edition=CHINESE)
    result = PatientValidator(config=config(blocked_seconds=2)).validate(str(path))
    stopped = result["failed"][0]["raw_error"]
    assert "CellStopped" in stopped and ZH[patient_validate.BLOCKED_LIMIT].split("{")[0] in stopped, stopped


def test_the_process_tree_is_counted_its_reaped_children_too():
    """A shell whose child computed 0.5 CPU-seconds and exited: the shell's tree used them, and sleeps now."""
    shell = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; b = time.process_time()\n"
                                          f"while time.process_time() - b < 0.5: pass'; sleep 30"])
    try:
        deadline = time.monotonic() + 60
        while tree_usage(shell.pid).cpu_seconds < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)
        usage = tree_usage(shell.pid)
        assert usage.cpu_seconds >= 0.5 and not usage.runnable, usage
    finally:
        shell.kill()
        shell.wait()


@pytest.mark.parametrize("language", ["en", CHINESE])
def test_a_stopped_cells_reason_fills_its_lines_by_display_columns(language):
    """The reason a limit stopped a cell, as nbgrader validate prints the cell's error: lines of at most 80 display
    columns (a CJK character: two), each as full as the next word or character allows, not cut at half for the
    Latin text a Chinese reason holds."""
    from nbformat.v4 import new_output
    from rlhf_course.classroom.submit_refusal import _columns
    from rlhf_course.i18n import t
    for sentence, fields in ((patient_validate.CPU_LIMIT, {"cpu": 31, "limit": 30}),
                             (patient_validate.BLOCKED_LIMIT, {"blocked": 61, "limit": 60})):
        cell = new_code_cell("x", outputs=[new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])])
        reason = t(sentence, language, **fields)
        patient_validate.PatientExecute._replace_interrupt(cell, reason)
        error, = cell.outputs
        assert error.ename == "CellStopped" and error.evalue == reason
        lines = error.traceback
        assert "".join("".join(lines).split()) == "".join(f"CellStopped: {reason}".split())
        assert all(_columns(line) <= 80 for line in lines), lines
        for line, following in zip(lines, lines[1:]):  # the break kept off the line what did not fit on it
            unit = following.split(" ")[0] if following[0].isascii() else following[:2]
            assert _columns(line) + 1 + _columns(unit) > 80, (line, following)
