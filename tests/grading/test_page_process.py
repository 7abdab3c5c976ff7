"""Pages render in a long-lived child process the grader kills at the page's budget: a render stuck
inside one step (where :mod:`safe_html`'s own budget cannot stop it) costs its submission the notebook
on its page, never the batch.  The Sandbox is the in-process double."""
from __future__ import annotations

import time

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.grading.pages import feedback
from rlhf_course.course.limits import Limits
from rlhf_course.grading.pages.page_process import KILL_GRACE, PageProcess, PageProcessError
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, release_course
from tests.support.in_process_sandbox import grade_in_process


def test_one_child_serves_page_after_page_and_a_stuck_one_is_killed_and_replaced():
    with PageProcess("tests.support.stuck_pages:pid") as pages:
        first = pages.call((), 30)
        assert pages.call((), 30) == first  # warm: the same process, its caches kept
    with PageProcess("tests.support.stuck_pages:stuck_in_one_step") as stuck:
        start = time.monotonic()
        assert stuck.call((), 0.5) is None
        assert time.monotonic() - start < 3.0 and stuck.kills == 1


def test_a_child_that_cannot_start_is_an_error_not_a_hang():
    with PageProcess("tests.support.stuck_pages:pid", warm_up="tests.support.stuck_pages:dies") as pages:
        with pytest.raises(PageProcessError, match="did not start"):
            pages.call((), 30)


def test_an_error_in_the_page_is_reported_and_a_dead_child_replaced():
    with PageProcess("tests.support.stuck_pages:raises") as pages:
        with pytest.raises(PageProcessError, match="ValueError: a bad page"):
            pages.call((), 30)
        with pytest.raises(PageProcessError):  # the child served on
            pages.call((), 30)
    with PageProcess("tests.support.stuck_pages:dies") as pages:
        assert pages.call((), 30) is None  # died mid-page: no page, no exception
        assert pages.call((), 30) is None  # and the next call got a fresh child


@pytest.mark.slow  # the release (cached across tests), then seconds
def test_a_stuck_page_costs_its_submission_the_notebook_and_the_next_page_renders(tmp_path, monkeypatch):
    course = copy_course(tmp_path / "course")
    release_course(course)
    course_handle = Course.at(course)
    for student in ("ada", "stuck"):
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    results = {r.student: r for r in grade_in_process(course_handle)}
    monkeypatch.setitem(feedback._PAGES, "render_page", PageProcess("tests.support.stuck_pages:stuck_when_asked",
                                                                    warm_up="rlhf_course.grading.pages.feedback:_exporter"))

    start = time.monotonic()
    page = feedback.write_feedback(Course.at(course), results["stuck"], Limits(render_seconds=1.0)).read_text()
    took = time.monotonic() - start
    print(f"stuck page: killed and replaced by the scores in {took:.2f} s")
    assert took < 1.0 + KILL_GRACE + 3.0
    assert "rendering was stopped after 2.0 s" in page
    assert f"{results['stuck'].score:g} / {results['stuck'].max_score:g}" in page
    assert "its render process was killed" in results["stuck"].detail
    copy = nbformat.read(str(course / "autograded" / "stuck" / ASSIGNMENT / NOTEBOOK), 4)
    outputs = [o for c in copy.cells for o in c.get("outputs", [])]
    assert outputs and all(o.get("text", "").startswith(("[trusted grader]", "[outputs not shown"))
                           for o in outputs)  # no output of the run kept, the verdicts still there

    honest = feedback.write_feedback(Course.at(course), results["ada"]).read_text()  # a fresh, warmed-up child
    assert "rendering was stopped" not in honest and "trusted grader: passed" in honest
    assert feedback._PAGES["render_page"].kills == 1
