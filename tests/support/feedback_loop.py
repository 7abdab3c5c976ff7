"""The feedback loop as a student and an instructor walk it on one machine, for the tests that return a grade:
release, fetch, submit, collect, grade (in-process: tests/support/in_process_sandbox.py), as this test's user."""
from __future__ import annotations

import fcntl
import getpass
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support.command_session import OwnCommandSession
from tests.support.course import copy_course, release_course
from tests.support.in_process_sandbox import grade_in_process

COURSE_ID = "rlhf-course"
STUDENT_CONFIG = """\
from rlhf_course import exchange
exchange.configure(get_config(), {root!r}, {course!r})
"""
ANSWER = "The policy gave up variety: a few positive words, over and over."


def _environment(base: Path) -> dict[str, str]:
    """The student's nbgrader configuration in ``base``/home, naming ``base``/exchange; their commands' environment."""
    (base / "home" / "nbgrader_config.py").write_text(STUDENT_CONFIG.format(root=str(base / "exchange"),
                                                                           course=COURSE_ID))
    return {"RLHF_EXCHANGE_ROOT": str(base / "exchange"), "HOME": str(base / "home")}


def _walk_the_loop(base: Path) -> None:
    """release, fetch, submit, collect and grade one submission in ``base`` (course/, exchange/, home/)."""
    course = release_course(copy_course(base / "course"))
    course_handle = Course.at(course)
    (base / "exchange").mkdir(mode=0o755)
    (base / "home").mkdir()
    env = _environment(base)
    student_home = base / "home"
    with OwnCommandSession(course) as commands:
        commands.nbgrader("release_assignment", ASSIGNMENT, env=env)
        commands.nbgrader("fetch_assignment", ASSIGNMENT, cwd=student_home, env=env)
        fetched = student_home / ASSIGNMENT / NOTEBOOK
        answers = {**examples.answers_for(course_handle, ()), "lab_question_1": ANSWER}
        nbformat.write(notebooks.fill_answers(notebooks.read(fetched), answers), str(fetched))
        commands.nbgrader("submit", ASSIGNMENT, cwd=student_home, env=env)
        commands.nbgrader("collect", ASSIGNMENT, env=env)
    [result] = grade_in_process(course_handle, students=[getpass.getuser()], export=False)
    assert result.written["lab_question_1"]["answered"] is True


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """The course after `make grade` of one submission that answers lab_question_1 in writing, made and
    collected through the exchange: the student's folder and the environment their commands run in, and the one
    process the instructor's and the student's nbgrader commands run in, one after another (``commands``: nbgrader's
    app reset between them; no test of the loop is about a process boundary).

    The loop is walked once per test run (all of pytest-xdist's workers share it, as the release) and each module
    gets its own copy, files' times kept: the student's configuration is the one file that names its folder."""
    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    walked = shared / "feedback-loop"
    with open(shared / "feedback-loop.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker may be walking it
        if not (walked / ".complete").exists():
            shutil.rmtree(walked, ignore_errors=True)
            walked.mkdir()
            _walk_the_loop(walked)
            (walked / ".complete").touch()
    base = tmp_path_factory.mktemp("feedback_is_the_grade")
    shutil.copytree(walked, base, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    env = _environment(base)
    with OwnCommandSession(base / "course") as commands:
        yield {"course": base / "course", "home": base / "home", "env": env, "student": getpass.getuser(),
               "commands": commands}


def fetched_page(loop) -> str:
    pages = sorted((loop["home"] / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK.replace('.ipynb', '.html')}"))
    assert pages, "fetch_feedback brought no page"
    return pages[-1].read_text()
