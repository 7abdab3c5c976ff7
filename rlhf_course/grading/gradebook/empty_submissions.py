"""Submission rows with nothing behind them, found and, only when asked, removed:
``python -m rlhf_course.grading empty-submissions [--remove]``.

Gradebooks made by older versions of the course hold such rows: their ``extend`` created a submission of every
language edition to hang the extension on, including the edition the student never took.  nbgrader shows each as
a submission (0 / 50, "needs manual grading") in the Formgrader, and grades.csv and the class report count it (a 0
where nothing was submitted; the LMS export leaves it blank).  ``extend`` no longer creates them
(:mod:`rlhf_course.grading.deadlines`).

A row is empty only when everything says so: no submission time, nothing of it in the course's ``submitted/``,
``autograded/`` or ``feedback/`` folders, no score, extra credit or comment in any cell (automatic or a person's),
and no notebook flagged.  A real submission always has one of these (collect writes ``submitted/``, grading
writes the scores), so it is never touched.  Removing one keeps its extension: it goes into the course's record
of extensions (:mod:`rlhf_course.course.extension_record`) unless that already holds one for the student and
assignment, so a later submission of either edition still gets it.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rlhf_course.course import extension_record
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course

FOLDERS = ("submitted", "autograded", "feedback")  # what collect, grading and feedback leave of a real submission


class EmptySubmissionError(CourseError):
    pass


@dataclass(frozen=True)
class EmptySubmission:
    student: str
    assignment: str  # the edition, as the gradebook names it (rlhf_zh)
    extension: dt.timedelta | None

    def line(self) -> str:
        extension = f", extension +{self.extension.total_seconds() / 3600:g} h" if self.extension else ""
        return f"{self.student:<20} {self.assignment:<16} (no submission time, no files, no grade{extension})"


def _has_files(course: Course, student: str, assignment: str) -> bool:
    return any(course.folder(step, student, assignment).exists() for step in FOLDERS)


def _has_grading(submission) -> bool:
    """A score, extra credit, comment or flag anywhere in one ``SubmittedAssignment``."""
    for notebook in submission.notebooks:
        if notebook.flagged:
            return True
        if any(g.auto_score is not None or g.manual_score is not None or g.extra_credit is not None
               for g in notebook.grades):
            return True
        if any(c.auto_comment or c.manual_comment for c in notebook.comments):
            return True
    return False


def is_empty(course: Course, submission) -> bool:
    """True when nothing of ``submission`` (an nbgrader ``SubmittedAssignment``) shows that a student submitted."""
    return (submission.timestamp is None and not _has_grading(submission)
            and not _has_files(course, submission.student.id, submission.assignment.name))


def find(gradebook, course: Course) -> list[EmptySubmission]:
    """Every empty submission row of an open nbgrader ``gradebook``, by assignment then student."""
    found = [EmptySubmission(submission.student.id, assignment.name, submission.extension)
             for assignment in gradebook.assignments for submission in assignment.submissions
             if is_empty(course, submission)]
    return sorted(found, key=lambda e: (e.assignment, e.student))


def remove(course: Course) -> list[EmptySubmission]:
    """Remove every empty submission row of the course's gradebook; returns them.  Each extension they carry is
    first put into the record of extensions (where the record has none for that student and assignment); each row
    is checked again just before it is removed."""
    from nbgrader.api import Gradebook, MissingEntry

    from rlhf_course.course import editions
    try:
        granted = extension_record.read(course)  # a damaged record stops this before anything changes
    except ValueError as exc:
        raise EmptySubmissionError(str(exc)) from None
    base = {e.assignment: e.base for e in editions.editions(course)}
    removed = []
    with Gradebook(course.db_url) as gb:
        found = find(gb, course)
        kept = {(e.student, base.get(e.assignment, e.assignment)): e.extension for e in found if e.extension}
        added = False
        for (student, assignment), extension in sorted(kept.items()):
            if assignment not in granted.get(student, {}):
                granted.setdefault(student, {})[assignment] = extension
                added = True
        if added:
            extension_record.write(course, granted)
        for empty in found:
            gb.db.expire_all()  # read it again: grading may have recorded work on this row since
            try:
                submission = gb.find_submission(empty.assignment, empty.student)
            except MissingEntry:
                continue
            if is_empty(course, submission):
                gb.remove_submission(empty.assignment, empty.student)
                removed.append(empty)
    return removed
