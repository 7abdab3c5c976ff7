"""Rendering is bounded: a submission's huge or deeply nested outputs cost its feedback page a fraction
of a second (they are cut, with a note), and a page that still takes longer than its budget is replaced
by the scores and a short note, without stopping the batch.  The Sandbox is the in-process double."""
from __future__ import annotations

import json
import time

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, results
from rlhf_course.grading.pages import feedback
from rlhf_course.course import notebooks
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, release_course
from tests.support.submissions import ran_with_outputs

from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # the release (cached across tests), then seconds


NESTED = [{"output_type": "display_data", "metadata": {}, "data": d} for d in (
    {"text/html": "<b>" * 87000, "text/plain": "bold"}, {"text/html": "<div>" * 8000})] + [
    {"output_type": "stream", "name": "stdout", "text": "y" * 300_000}]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("render_budget") / "course")
    release_course(course)
    course_handle = Course.at(course)
    for student in ("ada", "nested"):
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    results = {r.student: r for r in grade_in_process(course_handle)}
    # display(HTML('<b>' * 87000)) and friends, as the course's run of the notebook would send them back:
    # 44 s of bleach in the batch's one writer before the bounds (issue 27)
    results["nested"].executed_notebook = ran_with_outputs(results["nested"].canonical_notebook, {"answer": NESTED})
    return course, results


def _page_seconds(course, result) -> float:
    start = time.monotonic()
    feedback.write_feedback(Course.at(course), result)
    return time.monotonic() - start


def test_a_nested_tag_output_costs_the_batch_no_more_than_seconds(graded):
    course, results = graded
    honest, nested = (_page_seconds(course, results[s]) for s in ("ada", "nested"))
    print(f"feedback page: honest {honest:.2f} s, nested tags {nested:.2f} s")
    assert nested < honest + 2.0  # measured: 0.1 s for the page alone; 131 s before the bounds
    page = (course / "feedback" / "nested" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "HTML not rendered: 87,000 tags" in page and "HTML not rendered: 8,000 tags" in page
    assert "[this output was cut: it was 293.0 KiB; the first 64.0 KiB are shown]" in page
    autograded = nbformat.read(str(course / "autograded" / "nested" / ASSIGNMENT / NOTEBOOK), 4)
    answer = next(c for c in autograded.cells if notebooks.is_answer_cell(c))
    assert "HTML not rendered: 87,000 tags" in answer.outputs[0]["data"]["text/html"]
    assert len(json.dumps(answer.outputs)) < 250_000


def test_a_page_over_its_budget_shows_the_scores_and_why(graded, tmp_path):
    course, results = graded
    result = results["ada"]
    # each output under every bound (a tenth of a second of bleach): together far more than the budget
    outputs = [{"output_type": "display_data", "metadata": {}, "data": {"text/html": "<div>" * 990}}] * 300
    result.executed_notebook, result.detail = ran_with_outputs(result.canonical_notebook, {"answer": outputs}), ""
    start = time.monotonic()
    page = feedback.write_feedback(Course.at(tmp_path), result, seconds=1.0).read_text()
    took = time.monotonic() - start
    print(f"over-budget page written in {took:.2f} s")
    assert took < 4.0
    assert "The notebook is not shown here: rendering took more than its budget of 1.0 s" in page
    assert f"{result.score:g} / {result.max_score:g}" in page
    assert "feedback page without the notebook" in result.detail
    autograded = nbformat.read(str(tmp_path / "autograded" / "ada" / ASSIGNMENT / NOTEBOOK), 4)
    outputs = [o for c in autograded.cells for o in c.get("outputs", [])]
    assert outputs and all("<div>" not in json.dumps(o) for o in outputs)
    assert any("outputs not shown" in o.get("text", "") for o in outputs)


def test_the_page_budget_is_what_is_left_of_the_submissions():
    limits = Limits(submission_seconds=300.0)
    assert feedback.render_seconds(results.SubmissionResult("a", "graded", seconds=5.0), limits) == limits.render_seconds
    assert feedback.render_seconds(results.SubmissionResult("a", "graded", seconds=295.0), limits) == 5.0
    assert feedback.render_seconds(results.SubmissionResult("a", "timed out", seconds=300.0), limits) == \
        limits.min_render_seconds
