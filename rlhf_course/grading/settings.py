"""The course's own settings, configured where nbgrader is: in ``nbgrader_config.py``.

``c.RlhfCourse.due_date = "..."`` and ``c.TrustedGrading.workers = 4`` sit beside nbgrader's own
settings; ``python -m rlhf_course.grading.batch --help-all`` lists them with their defaults. A
command-line option, where there is one, wins over the file.
"""
from __future__ import annotations

from pathlib import Path

from traitlets import Float, Integer, Unicode
from traitlets.config import Configurable

from rlhf_course.grading.sandbox import Limits

BUDGETS = ("call_seconds", "feedback_seconds", "submission_seconds")  # the Limits a course may set


class RlhfCourse(Configurable):
    """The course, as `make release` records it in the gradebook."""

    due_date = Unicode("", help="Due date of the assignment (UTC, e.g. '2026-12-18 23:59:00 UTC'); "
                                "`make release` records it and nbgrader's late penalty uses it. "
                                "Empty: no due date.").tag(config=True)


class TrustedGrading(Configurable):
    """`sudo make grade`: each submission in a fresh sandbox, scores decided outside it."""

    workers = Integer(0, help="Sandboxes graded at a time on this machine (0: one per CPU).").tag(config=True)
    dask_address = Unicode("", help="Address of an existing Dask scheduler (tcp://host:8786) to send "
                                    "grading tasks to; empty: grade on this machine.").tag(config=True)
    call_seconds = Float(Limits.call_seconds, help="Wall-clock seconds one call of a student's function may take.").tag(config=True)
    feedback_seconds = Float(Limits.feedback_seconds, help="Seconds for running the whole notebook for the feedback copy."
                             ).tag(config=True)
    submission_seconds = Float(Limits.submission_seconds, help="Seconds for everything one submission costs (all calls plus the "
                                           "feedback run): no submission holds a worker longer.").tag(config=True)


def load(course_root: Path) -> tuple[RlhfCourse, TrustedGrading]:
    """The two settings objects, from the course's ``nbgrader_config.py`` (defaults where it is silent)."""
    from rlhf_course.grading.course import course_config
    config = course_config(course_root)
    return RlhfCourse(config=config), TrustedGrading(config=config)


def help_text() -> str:
    """What ``--help-all`` prints: each setting with its help and default, as nbgrader shows its own."""
    return "\n".join(cls.class_get_help() for cls in (RlhfCourse, TrustedGrading))
