"""A returned feedback page is the grade the gradebook holds: a person's score given in the Formgrader after
`make grade` reaches the student through `nbgrader release_feedback` and `fetch_feedback`, without grading again;
and no command writes stock nbgrader's page into feedback/.

The whole loop runs as this test's user (the student is this account): release, fetch, submit, collect, grade
(in-process: tests/support/in_process_sandbox.py), a manual grade through nbgrader's Gradebook API (what the
Formgrader's save calls), release_feedback, fetch_feedback."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from tests.support.course import gradebook_url
from tests.support.feedback_loop import ANSWER, COURSE_ID, fetched_page, loop  # noqa: F401  (loop: a fixture)

pytestmark = pytest.mark.slow  # a handful of nbgrader commands

def _grade_written_answer(course, student: str, score: float, comment: str) -> None:
    """What the Formgrader's save does: nbgrader's Gradebook API sets the manual score and comment."""
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        gb.find_grade("lab_question_1", NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student).manual_score = score
        gb.find_comment("lab_question_1", NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student).manual_comment = comment
        gb.db.commit()


def _grades_csv_score(course, student: str) -> str:
    with open(course / "grades.csv", newline="") as handle:
        [row] = [r for r in csv.DictReader(handle) if r["student_id"] == student and r["assignment"] == ASSIGNMENT]
    return row["score"]


def _export_as_make_grade_does(course) -> None:
    from nbgrader.api import Gradebook

    from rlhf_course.course.settings import Course
    from rlhf_course.grading.gradebook.export import EditionsCsvExport
    handle = Course.at(course)
    with Gradebook(gradebook_url(course)) as gb:
        EditionsCsvExport(config=handle.config, to=str(course / "grades.csv"), course_root=str(course)).export(gb)


def test_a_manual_grade_given_after_grading_is_what_the_student_fetches(loop):
    course, student = loop["course"], loop["student"]
    page = (course / "feedback" / student / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert f"{ASSIGNMENT}: 44 / 50" in page and "awaiting a person" in page  # as `make grade` wrote it
    _export_as_make_grade_does(course)
    assert float(_grades_csv_score(course, student)) == 44
    _grade_written_answer(course, student, 1.5, "Right; now say why entropy measures it.")
    released = loop["commands"].nbgrader("release_feedback", ASSIGNMENT, env=loop["env"])
    loop["commands"].nbgrader("fetch_feedback", ASSIGNMENT, cwd=loop["home"], env=loop["env"])
    fetched = fetched_page(loop)
    assert f"{ASSIGNMENT}: 45.5 / 50" in fetched and "awaiting a person" not in fetched
    assert "1.5 / 2" in fetched and "Right; now say why entropy measures it." in fetched
    assert ANSWER in fetched  # the notebook as it ran, from the copy stored at grading: no sandbox run
    said = released.stdout + released.stderr
    named = re.findall(r"Feedback released to: (\S+)", said)
    assert named and all(Path(path).is_file() and not path.endswith("-tmp.html") for path in named), said
    assert f"feedback for {student} on {ASSIGNMENT}/{NOTEBOOK.removesuffix('.ipynb')} rewritten" in said, said
    # grades.csv is the returned grade too: release_feedback wrote it again from the gradebook.
    assert float(_grades_csv_score(course, student)) == 45.5
    assert "grades.csv" in said, said

    # Released again with nothing changed: the page is not rewritten (it is the grade already).
    again = loop["commands"].nbgrader("release_feedback", ASSIGNMENT, env=loop["env"])
    assert "rewritten" not in again.stdout + again.stderr


def test_a_page_that_cannot_be_shown_current_is_not_released_and_the_command_is_named(loop):
    """A page without its grading record (written by hand, or by an older version): nothing is released."""
    from rlhf_course.grading.pages.grading_record import record_path
    from rlhf_course.course.settings import Course
    course, student = loop["course"], loop["student"]
    record = record_path(Course.at(course), student, ASSIGNMENT, NOTEBOOK)
    outbound = loop["env"]["RLHF_EXCHANGE_ROOT"] + f"/{COURSE_ID}/feedback"
    before = {p.name: p.stat().st_mtime_ns for p in Path(outbound).glob("*")}
    saved = record.read_bytes()
    record.unlink()
    try:
        refused = loop["commands"].nbgrader("release_feedback", ASSIGNMENT, check=False, env=loop["env"])
    finally:
        record.write_bytes(saved)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "No feedback released" in said and "no grading record" in said, said
    assert f"`make grade ASSIGNMENT={ASSIGNMENT}` (as root)" in said
    after = {p.name: p.stat().st_mtime_ns for p in Path(outbound).glob("*")}
    assert after == before


def _course_page_of(course, student: str) -> str:
    return (course / "feedback" / student / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()


def test_generate_feedback_renders_the_courses_page(loop):
    """`nbgrader generate_feedback` (the command) writes the course's page, with the gradebook's grades."""
    course, student = loop["course"], loop["student"]
    _grade_written_answer(course, student, 2.0, "Full marks after the office hour.")
    loop["commands"].nbgrader("generate_feedback", ASSIGNMENT, "--force", env=loop["env"])
    page = _course_page_of(course, student)
    assert "Tests: 44 / 44." in page and f"{ASSIGNMENT}: 46 / 50" in page  # the course's page, current
    assert "Full marks after the office hour." in page and "Test cell (Score" not in page  # never stock nbgrader's


def test_the_formgraders_generate_feedback_renders_the_courses_page(loop):
    """The Formgrader's *Generate Feedback* (its handler calls nbgrader's API) writes the course's page."""
    from nbgrader.apps import NbGraderAPI

    from rlhf_course.course.settings import Course
    course, student = loop["course"], loop["student"]
    _grade_written_answer(course, student, 0.5, "Say which words it repeats.")
    graded = Course.at(course)
    api = NbGraderAPI(coursedir=graded.coursedir, config=graded.config)
    outcome = api.generate_feedback(ASSIGNMENT, student)
    assert outcome["success"], outcome
    page = _course_page_of(course, student)
    assert "Tests: 44 / 44." in page and f"{ASSIGNMENT}: 44.5 / 50" in page
    assert "Say which words it repeats." in page and "Test cell (Score" not in page


def test_generate_feedback_without_a_grading_record_is_refused_and_the_page_kept(loop):
    from rlhf_course.grading.pages.grading_record import record_path
    from rlhf_course.course.settings import Course
    course, student = loop["course"], loop["student"]
    record = record_path(Course.at(course), student, ASSIGNMENT, NOTEBOOK)
    before = _course_page_of(course, student)
    saved = record.read_bytes()
    record.unlink()
    try:
        refused = loop["commands"].nbgrader("generate_feedback", ASSIGNMENT, "--force", check=False, env=loop["env"])
    finally:
        record.write_bytes(saved)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "no grading record" in said, said
    assert f"`make grade ASSIGNMENT={ASSIGNMENT}` (as root)" in said
    assert _course_page_of(course, student) == before  # nothing removed, nothing stock written


def test_a_grades_csv_that_cannot_be_written_is_said_and_names_the_command(loop, caplog):
    """Returning feedback goes on; the log says grades.csv may be stale and what writes it."""
    import logging
    import shutil

    from rlhf_course.course.settings import Course
    from rlhf_course.grading.pages.returned_feedback import export_grades
    course = loop["course"]
    saved = (course / "grades.csv").read_bytes() if (course / "grades.csv").is_file() else None
    (course / "grades.csv").unlink(missing_ok=True)
    (course / "grades.csv").mkdir()  # cannot be opened for writing
    try:
        with caplog.at_level(logging.ERROR):
            export_grades(Course.at(course), logging.getLogger("test-release-feedback"))
    finally:
        shutil.rmtree(course / "grades.csv")
        if saved is not None:
            (course / "grades.csv").write_bytes(saved)
    said = caplog.text
    assert "grades.csv not written" in said and "`nbgrader export`" in said, said
