"""The feedback loop as a student and an instructor walk it on one machine, for the tests that return a grade:
release, fetch, submit, collect, grade (in-process: tests/support/in_process_sandbox.py), as this test's user."""
from __future__ import annotations

import getpass

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from tests.support.command_session import OwnCommandSession
from tests.support.course import copy_course, release_course
from tests.support.in_process_sandbox import grade_in_process

COURSE_ID = "rlhf-course"
STUDENT_CONFIG = """\
from rlhf_course import exchange
exchange.configure(get_config(), {root!r}, {course!r})
"""
ANSWER = "The policy gave up variety: a few positive words, over and over."


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """The course after `make grade` of one submission that answers lab_question_1 in writing, made and
    collected through the exchange: the student's folder and the environment their commands run in, and the one
    process the instructor's and the student's nbgrader commands run in, one after another (``commands``: nbgrader's
    app reset between them; no test of the loop is about a process boundary)."""
    base = tmp_path_factory.mktemp("feedback_is_the_grade")
    course = release_course(copy_course(base / "course"))
    exchange = base / "exchange"
    exchange.mkdir(mode=0o755)
    student_home = base / "home"
    student_home.mkdir()
    (student_home / "nbgrader_config.py").write_text(STUDENT_CONFIG.format(root=str(exchange), course=COURSE_ID))
    env = {"RLHF_EXCHANGE_ROOT": str(exchange), "HOME": str(student_home)}
    with OwnCommandSession(course) as commands:
        commands.nbgrader("release_assignment", ASSIGNMENT, env=env)
        commands.nbgrader("fetch_assignment", ASSIGNMENT, cwd=student_home, env=env)
        fetched = student_home / ASSIGNMENT / NOTEBOOK
        answers = {**examples.answers_for(course, ()), "lab_question_1": ANSWER}
        nbformat.write(notebooks.fill_answers(notebooks.read(fetched), answers), str(fetched))
        commands.nbgrader("submit", ASSIGNMENT, cwd=student_home, env=env)
        commands.nbgrader("collect", ASSIGNMENT, env=env)
        student = getpass.getuser()
        [result] = grade_in_process(course, students=[student], export=False)
        assert result.written["lab_question_1"]["answered"] is True
        yield {"course": course, "home": student_home, "env": env, "student": student, "commands": commands}



def fetched_page(loop) -> str:
    pages = sorted((loop["home"] / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK.replace('.ipynb', '.html')}"))
    assert pages, "fetch_feedback brought no page"
    return pages[-1].read_text()
