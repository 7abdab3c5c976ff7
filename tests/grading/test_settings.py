"""The course's settings live in nbgrader_config.py beside nbgrader's own (no root, no sandbox)."""
import os

import pytest

import dataclasses

from rlhf_course.grading import app
from rlhf_course.grading.limits import Limits
from rlhf_course.grading.settings import Course
from tests.support.course import copy_course


@pytest.fixture
def course(tmp_path):
    root = copy_course(tmp_path / "course")
    with open(root / "nbgrader_config.py", "a") as config:
        config.write("\nc.TrustedGrading.workers = 3\nc.TrustedGrading.call_seconds = 7.5\n"
                     "c.TrustedGrading.dask_address = 'tcp://scheduler:8786'\n")
    return root


def test_the_config_file_sets_the_grader_and_leaves_the_rest_at_their_defaults(course, repo):
    course_settings, grading = Course.at(course).settings()
    assert (grading.workers, grading.call_seconds, grading.dask_address) == (3, 7.5, "tcp://scheduler:8786")
    assert (grading.feedback_seconds, grading.submission_seconds) == (Limits.feedback_seconds, Limits.submission_seconds)
    # the repository's nbgrader_config.py: RLHF_DUE_DATE (the tests set one far away) or its own date
    assert course_settings.due_date == os.environ.get("RLHF_DUE_DATE", "2026-12-18 23:59:00 UTC")
    untouched = Course.at(repo).settings()[1]
    assert (untouched.workers, untouched.call_seconds, untouched.dask_address) == (0, Limits.call_seconds, "")


def _grade_command(argv: list[str]):
    command = app.RlhfGrader()
    command.initialize(["grade", *argv])
    return command.subapp


def test_a_command_line_option_wins_over_the_file(course):
    command = _grade_command([f"--course-root={course}", "--call-seconds=2", "--workers=1", "--TrustedGrading.cells=50"])
    grading = command.course.settings()[1]
    limits = grading.limits()
    assert (limits.call_seconds, limits.cells, limits.submission_seconds, grading.workers, grading.dask_address) == \
        (2.0, 50, Limits.submission_seconds, 1, "tcp://scheduler:8786")
    grading = _grade_command([f"--course-root={course}"]).course.settings()[1]
    assert (grading.limits().call_seconds, grading.workers) == (7.5, 3)


def test_help_all_lists_every_setting_and_limit_with_its_default(capsys):
    assert app.main(["grade", "--help-all"]) == 0
    shown = capsys.readouterr().out
    for name in ("RlhfCourse.due_date", "TrustedGrading.workers", "TrustedGrading.dask_address",
                 *(f"TrustedGrading.{limit.name}" for limit in dataclasses.fields(Limits))):
        assert f"--{name}=" in shown, name
    assert "Default: 300.0" in shown
