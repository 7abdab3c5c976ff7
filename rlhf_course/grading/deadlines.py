"""Deadlines as a term lives them: a due date per assignment (:mod:`rlhf_course.course.due_dates`: never
overwritten once the gradebook has one), extensions per student, kept where nbgrader keeps them (the gradebook's ``Submission.extension``), so
nbgrader's own late penalty (``Submission.total_seconds_late``: due date plus extension) honours them in
trusted grading and in stock ``nbgrader autograde`` alike; both put into the exchange, where students read them,
by :func:`rlhf_course.exchange.deadlines.publish`.

    python -m rlhf_course.grading extend alice grpo --hours 48      # grant (or change) an extension
    python -m rlhf_course.grading extend alice grpo --until "2026-12-20 18:00 UTC"
    python -m rlhf_course.grading extend --list                     # every extension granted
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rlhf_course.course.dates import DeadlineError, parse_when
from rlhf_course.course.settings import Course


@dataclass(frozen=True)
class Extension:
    student: str
    assignment: str
    due: dt.datetime | None  # the assignment's due date (naive UTC)
    extension: dt.timedelta

    @property
    def hours(self) -> float:
        return self.extension.total_seconds() / 3600

    def line(self) -> str:
        due = f"due {self.due:%Y-%m-%d %H:%M} UTC" if self.due else "no due date"
        until = f", until {self.due + self.extension:%Y-%m-%d %H:%M} UTC" if self.due else ""
        return f"{self.student:<20} {self.assignment:<16} +{self.hours:g} h ({due}{until})"


def _same_assignment(course: Course, assignment: str) -> list[str]:
    """``assignment`` and its language editions (a student submits one of them; the extension holds for each)."""
    from rlhf_course.grading import editions
    found = editions.editions(course)
    base = next((e.base for e in found if e.assignment == assignment), assignment)
    return [base] + sorted(e.assignment for e in found if e.base == base)


def penalties_kept(course: Course, student: str, assignment: str) -> list[tuple[str, float]]:
    """(edition, points) for each of ``student``'s graded submissions of ``assignment`` (and its language editions)
    that carry a late penalty: grading wrote it, with the extension of that time, and only grading again changes it
    (an extension granted since is not in it yet)."""
    from nbgrader.api import Gradebook, MissingEntry
    kept = []
    with Gradebook(course.db_url) as gb:
        for name in _same_assignment(course, assignment):
            try:
                submission = gb.find_submission(name, student)
            except MissingEntry:
                continue
            if submission.timestamp is not None and submission.late_submission_penalty:
                kept.append((name, float(submission.late_submission_penalty)))
    return kept


def grant_extension(course: Course, student: str, assignment: str, hours: float | None = None,
                    until: str | None = None, now: dt.datetime | None = None) -> Extension:
    """Give ``student`` ``hours`` more on ``assignment`` (and its language editions), or until the date
    ``until``; checked before anything is written: the student and the assignment must be in the gradebook,
    the assignment must have a due date, the new deadline must be after the due date and not already past."""
    import warnings

    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning
    if (hours is None) == (until is None):
        raise DeadlineError("give either --hours or --until")
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    with Gradebook(course.db_url) as gb:
        try:
            gb.find_student(student)
        except MissingEntry:
            raise DeadlineError(f"no student {student!r} in the gradebook (add them with `nbgrader db student add "
                                f"{student}` or let them submit once)") from None
        try:
            due = gb.find_assignment(assignment).duedate
        except MissingEntry:
            known = ", ".join(a.name for a in gb.assignments) or "none"
            raise DeadlineError(f"no assignment {assignment!r} in the gradebook (known: {known})") from None
        if due is None:
            raise DeadlineError(f"{assignment!r} has no due date: set one (c.RlhfCourse.due_dates or the "
                                f"Formgrader) before granting an extension")
        if hours is not None:
            if not (0 < hours <= 24 * 366):
                raise DeadlineError(f"--hours must be more than 0 and at most a year, not {hours:g}")
            extension = dt.timedelta(hours=hours)
        else:
            deadline = parse_when(until)
            if deadline <= due:
                raise DeadlineError(f"{until!r} is not after the due date ({due:%Y-%m-%d %H:%M} UTC)")
            extension = deadline - due
        if due + extension <= now:
            raise DeadlineError(f"the extended deadline {due + extension:%Y-%m-%d %H:%M} UTC is already past")
        for name in _same_assignment(course, assignment):
            try:
                gb.find_assignment(name)
            except MissingEntry:
                continue  # an edition not released yet
            with warnings.catch_warnings():  # nbgrader's add_submission trips a harmless autoflush warning
                warnings.simplefilter("ignore", SAWarning)
                gb.update_or_create_submission(name, student, extension=extension)
    return Extension(student, assignment, due, extension)


def extensions(course: Course) -> list[Extension]:
    """Every extension in the gradebook, by assignment then student."""
    from nbgrader.api import Gradebook
    found = []
    with Gradebook(course.db_url) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                if submission.extension:
                    found.append(Extension(submission.student.id, assignment.name, assignment.duedate,
                                       submission.extension))
    return sorted(found, key=lambda e: (e.assignment, e.student))


def publish_for(course: Course, assignments: list[str] | None = None, log=None) -> list[str]:
    """:func:`publish` to the course's exchange (``c.Exchange.root``, ``c.CourseDirectory.course_id``), from its
    gradebook; a clear error when the course has no exchange yet."""
    from nbgrader.exchange.default.exchange import Exchange

    from rlhf_course.exchange.deadlines import PublishError, publish
    root = Exchange(config=course.config).root
    course_id = course.coursedir.course_id
    if not course_id:
        raise DeadlineError("the course sets no c.CourseDirectory.course_id: there is no exchange to publish to")
    try:
        return publish(course, root, course_id, assignments, log)
    except (PublishError, OSError) as exc:
        raise DeadlineError(f"the deadlines could not be put in the exchange: {exc}") from None
