"""``nbgrader export`` with one row per student and assignment, whatever edition they chose.

A language edition (``rlhf_zh``) is its own nbgrader assignment, so stock export lists a student
once per edition, a zero beside their real score.  This plugin (``c.ExportApp.plugin_class`` in
nbgrader_config.py) folds each assignment's editions into one row named after the base assignment,
taken from the student's latest submission among them, with an ``edition`` column saying which one,
and a ``status`` column: ``missing`` (no score at all: blank, never 0) or ``submitted``.  Values are CSV-quoted (stock export writes names with commas raw), and
text is made inert for a spreadsheet (:mod:`spreadsheet`: ids and names may be a student's own).
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

from rlhf_course import spreadsheet
from rlhf_course.course.settings import Course
from rlhf_course.grading import editions

MISSING, SUBMITTED = "missing", "submitted"  # the status column: a missing submission has no score, not 0
COLUMNS = ["assignment", "edition", "status", "duedate", "extension_hours", "timestamp", "student_id", "last_name",
           "first_name", "email", "raw_score", "late_submission_penalty", "score", "max_score"]


def groups(gradebook: Gradebook, course: Course) -> dict[str, list]:
    """Base assignment name -> the gradebook's assignments that are it or one of its editions (the course's
    i18n/ names them)."""
    base = {e.assignment: e.base for e in editions.editions(course)}
    grouped: dict[str, list] = {}
    for assignment in gradebook.assignments:
        grouped.setdefault(base.get(assignment.name, assignment.name), []).append(assignment)
    return grouped


class EditionsCsvExport(ExportPlugin):
    """CSV export: one row per student per base assignment (its editions folded in)."""

    course_root = Unicode(".", help="the course folder, whose i18n/ names the language editions").tag(config=True)

    def groups(self, gradebook: Gradebook) -> dict[str, list]:
        """Base assignment name -> the gradebook's assignments that are it or its editions."""
        return groups(gradebook, self.course_at_course_root())

    def course_at_course_root(self) -> Course:
        """The course this setting names (a path in nbgrader_config.py), with the export's configuration."""
        return Course.at(Path(self.course_root), self.config)

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        wanted_students = {str(s) for s in self.student}
        wanted = {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s (one row per student and assignment, editions folded)", dest)
        with open(dest, "w", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS)
            writer.writeheader()
            for base, group in self.groups(gradebook).items():
                if wanted and base not in wanted and not wanted & {a.name for a in group}:
                    continue
                for student in gradebook.students:
                    if wanted_students and student.id not in wanted_students:
                        continue
                    writer.writerow({key: spreadsheet.cell(value)
                                     for key, value in self.row(gradebook, base, group, student).items()})

    @staticmethod
    def row(gradebook: Gradebook, base: str, group: list, student) -> dict:
        shown = next((a for a in group if a.name == base), group[0])
        row = {"assignment": base, "edition": "", "status": MISSING, "duedate": shown.duedate or "",
               "extension_hours": "", "timestamp": "", "student_id": student.id, "last_name": student.last_name or "",
               "first_name": student.first_name or "", "email": student.email or "", "raw_score": "",
               "late_submission_penalty": "", "score": "", "max_score": shown.max_score}
        found = counted_submission(gradebook, group, student.id)
        if found:
            assignment, submission = found
            penalty = submission.late_submission_penalty or 0.0
            extension = submission.extension.total_seconds() / 3600 if submission.extension else ""
            row.update(edition=assignment.name, status=SUBMITTED, duedate=assignment.duedate or "",
                       extension_hours=extension, timestamp=submission.timestamp or "",
                       raw_score=submission.score, late_submission_penalty=penalty,
                       score=max(0.0, submission.score - penalty), max_score=assignment.max_score)
        return row


def counted_submission(gradebook: Gradebook, group: list, student_id: str) -> tuple | None:
    """The submission that counts among an assignment's editions (``group``: the gradebook's assignments), as
    (assignment, submission): the latest, undated ones counting least; None when the student submitted none."""
    submissions = []
    for assignment in group:
        try:
            submissions.append((assignment, gradebook.find_submission(assignment.name, student_id)))
        except MissingEntry:
            pass
    if not submissions:
        return None
    return max(submissions, key=lambda pair: (pair[1].timestamp is not None, pair[1].timestamp or 0))
