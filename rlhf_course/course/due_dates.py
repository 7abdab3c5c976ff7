"""A configured due date (``c.RlhfCourse.due_dates`` / ``due_date``), as a date and into the gradebook, where
it is set once: the release records it, the Formgrader may change it, a later release never overwrites it."""
from __future__ import annotations

import datetime as dt

from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course


class DeadlineError(CourseError, ValueError):
    """A deadline command that cannot be done as asked; nothing was written."""


def parse_when(text: str, setting: str = "") -> dt.datetime:
    """A date as an instructor types it (nbgrader's formats: '2026-12-20 18:00 UTC', ISO 8601, a zone or
    none: UTC), as a naive UTC datetime, the gradebook's way; a clear error otherwise, naming the ``setting``
    it was given in (e.g. ``c.RlhfCourse.due_date``) when there is one."""
    from dateutil.parser import ParserError

    from nbgrader.utils import parse_utc
    try:
        return parse_utc(text)
    except (ParserError, ValueError, OverflowError, TypeError) as exc:
        said = f"{setting} is not a date" if setting else "not a date"
        raise DeadlineError(f"{said}: {text!r} ({exc}); write it as '2026-12-20 18:00 UTC'") from None


def due_date_for(course: Course, assignment: str) -> str:
    """The configured due date of ``assignment``: ``c.RlhfCourse.due_dates[assignment]``, else
    ``c.RlhfCourse.due_date`` (the default for every other assignment); empty: none."""
    rlhf_course = course.settings()[0]
    return rlhf_course.due_dates.get(assignment, rlhf_course.due_date) or ""


def record_due_date(gradebook, assignment: str, due: str) -> None:
    """Create ``assignment`` in the gradebook if needed and give it ``due`` only if it has no due date yet:
    a date the instructor set (the Formgrader, an earlier release) is never overwritten by a release."""
    from nbgrader.api import MissingEntry
    try:
        existing = gradebook.find_assignment(assignment)
    except MissingEntry:
        existing = None
    if existing is not None and (existing.duedate is not None or not due):
        return
    if due:
        parse_when(due)  # (RlhfCourse refused a malformed configured date as the configuration loaded)
        gradebook.update_or_create_assignment(assignment, duedate=due)
    else:
        gradebook.update_or_create_assignment(assignment)
