"""Deadlines as a term lives them: a due date per assignment (:mod:`rlhf_course.course.due_dates`: never
overwritten once the gradebook has one), extensions per student and assignment (all its language editions),
recorded by the course (:mod:`rlhf_course.course.extension_record`) and put where nbgrader keeps them, on the
submissions the student has made (the gradebook's ``SubmittedAssignment.extension``), so nbgrader's own late
penalty (``total_seconds_late``: due date plus extension) honours them; a submission recorded later (trusted
grading) gets its extension then.  No submission row is ever created for an extension: the Formgrader, the class
report and the exports would show a submission the student never made.  Both put into the exchange, where
students read them, by :func:`rlhf_course.exchange.deadlines.publish`.

    python -m rlhf_course.grading extend alice grpo --hours 48      # grant (or change) an extension
    python -m rlhf_course.grading extend alice grpo --until "2026-12-20 18:00 UTC"
    python -m rlhf_course.grading extend --list                     # every extension granted
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rlhf_course.course import extension_record
from rlhf_course.course.dates import DeadlineError, parse_when
from rlhf_course.course.extension_record import Granted
from rlhf_course.course.settings import Course


@dataclass(frozen=True)
class Extension:
    student: str
    assignment: str
    due: dt.datetime | None  # the assignment's due date (naive UTC)
    extension: dt.timedelta
    submitted: bool = True  # False: granted before any submission of the assignment, for the edition they submit

    @property
    def hours(self) -> float:
        return self.extension.total_seconds() / 3600

    def line(self) -> str:
        due = f"due {self.due:%Y-%m-%d %H:%M} UTC" if self.due else "no due date"
        until = f", until {self.due + self.extension:%Y-%m-%d %H:%M} UTC" if self.due else ""
        waiting = "" if self.submitted else "; not submitted yet: for the edition they submit"
        return f"{self.student:<20} {self.assignment:<16} +{self.hours:g} h ({due}{until}{waiting})"


def _same_assignment(course: Course, assignment: str) -> list[str]:
    """``assignment``'s base and its language editions (a student submits one of them; the extension holds for
    each)."""
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


def granted(course: Course) -> Granted:
    """Every extension recorded, for grading to give each submission it records (a damaged record: a
    :class:`DeadlineError` naming the file)."""
    try:
        return Granted.of(course)
    except ValueError as exc:
        raise DeadlineError(str(exc)) from None


def grant_extension(course: Course, student: str, assignment: str, hours: float | None = None,
                    until: str | None = None, now: dt.datetime | None = None) -> Extension:
    """Give ``student`` ``hours`` more on ``assignment`` (and its language editions), or until the date
    ``until``; checked before anything is written: the student and the assignment must be in the gradebook,
    the assignment must have a due date, the new deadline must be after the due date and not already past.
    Recorded for the assignment, and set on each edition's submission the student has made (none is created)."""
    from nbgrader.api import Gradebook, MissingEntry
    if (hours is None) == (until is None):
        raise DeadlineError("give either --hours or --until")
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    given = granted(course).by_student  # a damaged record stops the grant before the gradebook is touched
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
        group = _same_assignment(course, assignment)
        given.setdefault(student, {})[group[0]] = extension
        extension_record.write(course, given)
        submitted = False
        for name in group:
            try:
                gb.find_submission(name, student).extension = extension
                submitted = True
            except MissingEntry:
                continue  # not submitted (or not released): the record holds it until they submit
        gb.db.commit()
    return Extension(student, assignment, due, extension, submitted)


def extensions(course: Course) -> list[Extension]:
    """Every extension: each submission's in the gradebook, then each one recorded for an assignment the
    student has not submitted yet (under its base assignment); by assignment then student."""
    from nbgrader.api import Gradebook
    found, submitted = [], set()
    recorded = granted(course)
    with Gradebook(course.db_url) as gb:
        dues = {a.name: a.duedate for a in gb.assignments}
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                submitted.add((submission.student.id, recorded.base.get(assignment.name, assignment.name)))
                if submission.extension:
                    found.append(Extension(submission.student.id, assignment.name, assignment.duedate,
                                           submission.extension))
    for student, given in recorded.by_student.items():
        for base, extension in given.items():
            if (student, base) not in submitted:
                found.append(Extension(student, base, dues.get(base), extension, submitted=False))
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
    except (PublishError, OSError, ValueError) as exc:  # ValueError: a damaged record of extensions
        raise DeadlineError(f"the deadlines could not be put in the exchange: {exc}") from None
