"""A configured due date (``c.RlhfCourse.due_dates`` / ``due_date``), as a date and into the gradebook, where
it is set once: the release records it, the Formgrader may change it, a later release never overwrites it."""
from __future__ import annotations

from rlhf_course.course.dates import parse_when
from rlhf_course.course.settings import Course


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
        parse_when(due)  # (a configured date was checked as the configuration loaded; any other is checked here)
        gradebook.update_or_create_assignment(assignment, duedate=due)
    else:
        gradebook.update_or_create_assignment(assignment)


def kept_date_note(gradebook, course: Course, assignment: str) -> str:
    """A sentence when ``assignment``'s due date in the gradebook is not the configured one, else "": a release
    never overwrites a recorded date, so a date moved in nbgrader_config.py alone changes nothing, and the late
    penalty goes on using the gradebook's.  Says which date stays and how to move it."""
    from nbgrader.api import MissingEntry
    configured = due_date_for(course, assignment)
    try:
        kept = gradebook.find_assignment(assignment).duedate
    except MissingEntry:
        return ""
    if not configured or kept is None or parse_when(configured) == kept:
        return ""
    wanted = f"{parse_when(configured):%Y-%m-%d %H:%M} UTC"
    return (f"{assignment}: the gradebook's due date {kept:%Y-%m-%d %H:%M} UTC stays, not nbgrader_config.py's "
            f"{wanted} (a release never overwrites a recorded date; the late penalty uses the gradebook's). To move "
            f"it: `nbgrader db assignment add {assignment} --duedate='{wanted}'` (or the Formgrader), then "
            f"`python -m rlhf_course.grading publish-deadlines`.")
