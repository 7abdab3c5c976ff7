"""A date as an instructor types it, in a setting or on a command line, read as nbgrader reads it (below the
course's settings, which check their due dates with it as the configuration loads)."""
from __future__ import annotations

import datetime as dt

from rlhf_course.course.errors import CourseError


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
