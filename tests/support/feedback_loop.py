"""The feedback loop as a student and an instructor walk it on one machine, for the tests that return a grade:
release, fetch, submit, collect, grade (in-process: tests/support/in_process_sandbox.py), as this test's user."""
from __future__ import annotations

import getpass

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from rlhf_course.grading.release import nbgrader
from rlhf_course.course.settings import Course
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
    collected through the exchange: the student's folder and the environment their commands run in."""
    base = tmp_path_factory.mktemp("feedback_is_the_grade")
    course = release_course(copy_course(base / "course"))
    exchange = base / "exchange"
    exchange.mkdir(mode=0o755)
    student_home = base / "home"
    student_home.mkdir()
    (student_home / "nbgrader_config.py").write_text(STUDENT_CONFIG.format(root=str(exchange), course=COURSE_ID))
    env = {"RLHF_EXCHANGE_ROOT": str(exchange), "HOME": str(student_home)}
    nbgrader(course, "release_assignment", ASSIGNMENT, extra_env=env)
    nbgrader(student_home, "fetch_assignment", ASSIGNMENT, extra_env=env)
    fetched = student_home / ASSIGNMENT / NOTEBOOK
    course_handle = Course.at(course)
    answers = {**examples.answers_for(course_handle, ()), "lab_question_1": ANSWER}
    nbformat.write(notebooks.fill_answers(notebooks.read(fetched), answers), str(fetched))
    nbgrader(student_home, "submit", ASSIGNMENT, extra_env=env)
    nbgrader(course, "collect", ASSIGNMENT, extra_env=env)
    student = getpass.getuser()
    [result] = grade_in_process(course_handle, students=[student], export=False)
    assert result.written["lab_question_1"]["answered"] is True
    return {"course": course, "home": student_home, "env": env, "student": student}



def fetched_page(loop) -> str:
    pages = sorted((loop["home"] / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK.replace('.ipynb', '.html')}"))
    assert pages, "fetch_feedback brought no page"
    return pages[-1].read_text()
