"""`make demo`'s example class (python -m rlhf_course.grading examples) run in a live course: it grades its own
students in a copy of the course's inputs and leaves the course's students, gradebook and grades exactly as they
were; it says where it writes."""
import hashlib
from pathlib import Path

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import app, examples, instructor, release
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, gradebook_url, release_course
from tests.support.in_process_sandbox import grade_in_process

REAL_STUDENT = "real_student"


def snapshot(course: Path) -> dict[str, str]:
    """Every file of the course, but the example class's folder: relative path -> SHA-256."""
    return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(course.rglob("*")) if p.is_file() and "outputs" not in p.relative_to(course).parts}


@pytest.mark.slow
def test_the_example_class_never_touches_the_course_it_runs_in(tmp_path, monkeypatch, capsys):
    course = release_course(copy_course(tmp_path / "course"))
    course_handle = Course.at(course)
    examples.write_submission(course_handle, REAL_STUDENT, examples.answers_for(course_handle, ("dpo_missing_beta",)))
    grade_in_process(course_handle)  # the course's own grading: gradebook, autograded/, feedback/, grades.csv
    for made in ("grades.csv", "gradebook.db", f"autograded/{REAL_STUDENT}/{ASSIGNMENT}/{NOTEBOOK}"):
        assert (course / made).is_file(), made
    before = snapshot(course)

    proc = release.python_module(course, "rlhf_course.grading", "examples")
    copy = course / "outputs" / "example_class"
    assert f"the example class is graded in {copy} " in proc.stdout, proc.stdout
    assert f"nothing in {course} changes" in proc.stdout
    assert snapshot(course) == before

    catalogue = instructor.load_module(Course.at(course), "rlhf_catalogue")
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(copy)) as gradebook:
        assert sorted(s.id for s in gradebook.students) == sorted(catalogue.EXAMPLE_SUBMISSIONS)
    with Gradebook(gradebook_url(course)) as gradebook:
        assert [s.id for s in gradebook.students] == [REAL_STUDENT]
    assert sorted(p.name for p in (copy / "submitted").iterdir()) == sorted(catalogue.EXAMPLE_SUBMISSIONS)

    # Refused before it writes anything: the command's own main in this process (one interpreter's start fewer,
    # about 2 CPU-s; the command line itself ran just above), in the course as `make demo` runs it.
    monkeypatch.chdir(course)
    capsys.readouterr()
    refused = app.main(["examples", f"--into={course / 'source'}"])
    assert refused == 2 and "is not empty and is not an example class made here" in capsys.readouterr().err
    assert snapshot(course) == before
