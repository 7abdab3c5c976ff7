"""The course's grades as a learning management system imports them:
``python -m rlhf_course.grading export --format canvas|moodle|long``.

One row per student of the roster (nbgrader's students table), one column per assignment with its language
editions folded in (``rlhf`` and ``rlhf_zh`` are one column: the submission that counts is the latest, as in
grades.csv), each score after the late penalty.  A missing submission is a blank cell, which both LMSs read as
"no grade" (never 0, which would be a grade), and so is an empty submission row an older ``extend`` made
(:mod:`empty_submissions`); ``long`` says ``missing`` in its ``status`` column.  Every cell is
made inert for a spreadsheet (:mod:`spreadsheet`).

Only assignments students were given have a column: one of its editions is in the course's exchange
(``<Exchange.root>/<course id>/outbound/``, where ``nbgrader release_assignment`` puts it) or someone submitted one.
`make release` records every assignment of source/ in the gradebook before any is released; a column for one never
released would read as work the whole class left undone (in Canvas, a new assignment with every grade missing).
:func:`offered` says which were left out, and the command prints them.

* ``canvas``: Canvas's gradebook CSV: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  assignment.  The student's nbgrader id (their login) is the SIS Login ID, their name "Last, First"; ID (Canvas's
  own user number), SIS User ID and Section are left for Canvas to match.  A column Canvas does not know becomes
  a new assignment there.
* ``moodle``: Moodle's CSV grade import, which reads the format of its CSV grade export: the user fields
  ``First name, Last name, ID number, Email address``, then one column per grade item.  On import, map "ID number"
  to useridnumber (or "Email address" to useremail) and each assignment column to its grade item.
* ``long``: one row per student and assignment, with the edition, status, raw score, late penalty, score and
  maximum.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from rlhf_course import spreadsheet
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course
from rlhf_course.grading.gradebook import empty_submissions
from rlhf_course.grading.gradebook.export import MISSING, SUBMITTED, counted_submission, groups

FORMATS = ("canvas", "moodle", "long")
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTITY = ["First name", "Last name", "ID number", "Email address"]
LONG_COLUMNS = ["student_id", "last_name", "first_name", "email", "assignment", "edition", "status", "raw_score",
                "late_penalty", "score", "max_score", "timestamp"]


@dataclass
class Grade:
    """One student's counted submission of one assignment: points, the penalty in points, the score after it."""
    edition: str
    raw_score: float
    late_penalty: float
    score: float
    max_score: float
    timestamp: object


@dataclass
class Student:
    id: str
    first_name: str
    last_name: str
    email: str


@dataclass
class GradeTable:
    """Every student of the roster against every assignment (editions folded): ``grades[(student id,
    assignment)]`` is a :class:`Grade`, or None when nothing was submitted."""
    assignments: list[str]
    max_scores: dict[str, float]
    students: list[Student]
    grades: dict[tuple[str, str], Grade | None] = field(default_factory=dict)


class UnknownFormat(CourseError, ValueError):
    pass


class ExchangeUnreadable(CourseError, OSError):
    pass


def released(course: Course) -> set[str]:
    """The assignments in the course's exchange now, each edition by its own name (``rlhf_zh``): the folders of
    ``<Exchange.root>/<course id>/outbound/``; none when nothing was released there yet."""
    from nbgrader.exchange.default.exchange import Exchange
    outbound = Path(Exchange(config=course.config).root, course.coursedir.course_id, "outbound")
    try:
        return {entry.name for entry in outbound.iterdir() if entry.is_dir()}
    except (FileNotFoundError, NotADirectoryError):
        return set()
    except OSError as exc:
        raise ExchangeUnreadable(f"the exchange's released assignments cannot be listed ({outbound}: "
                                 f"{exc.strerror}): export as a user who can read it") from None


def offered(gradebook, course: Course) -> tuple[list[str], list[str]]:
    """(exported, left out): the base assignments of an open nbgrader ``gradebook`` students were given (an edition
    released in the exchange, or a submission of one: an empty row an older `extend` made is none,
    :mod:`empty_submissions`), and those only recorded there, never released; each sorted."""
    in_exchange = released(course)
    exported, left_out = [], []
    for base, group in sorted(groups(gradebook, course).items()):
        given = any(a.name in in_exchange or any(not empty_submissions.is_empty(course, s) for s in a.submissions)
                    for a in group)
        (exported if given else left_out).append(base)
    return exported, left_out


def grade_table(gradebook, course: Course, assignments: list[str] | None = None) -> GradeTable:
    """The :class:`GradeTable` of an open nbgrader ``Gradebook``; the course's i18n/ names the editions.
    ``assignments``: the base assignments to tabulate (default: every one in the gradebook)."""
    grouped = groups(gradebook, course)
    assignments = sorted(grouped) if assignments is None else sorted(assignments)
    max_scores = {}
    for base, group in grouped.items():
        shown = next((a for a in group if a.name == base), group[0])
        max_scores[base] = float(shown.max_score)
    students = [Student(s.id, s.first_name or "", s.last_name or "", s.email or "")
                for s in sorted(gradebook.students, key=lambda s: s.id)]
    table = GradeTable(assignments, max_scores, students)
    for student in students:
        for base in assignments:
            found = counted_submission(gradebook, grouped[base], student.id)
            if found is None or empty_submissions.is_empty(course, found[1]):  # an older extend's row: nothing
                table.grades[(student.id, base)] = None
                continue
            assignment, submission = found
            penalty = float(submission.late_submission_penalty or 0.0)
            table.grades[(student.id, base)] = Grade(assignment.name, float(submission.score), penalty,
                                                     max(0.0, float(submission.score) - penalty),
                                                     float(assignment.max_score), submission.timestamp)
    return table


def totals(table: GradeTable) -> dict[str, tuple[float, float]]:
    """{student id: (score, max score)} over every assignment, editions folded: each assignment's counted edition's
    raw score (before the late penalty, as the Formgrader's other pages show scores; 0 when nothing was submitted),
    out of the sum of one edition's maximum per assignment (what a student can earn)."""
    most = sum(table.max_scores[a] for a in table.assignments)
    return {student.id: (sum(grade.raw_score for a in table.assignments
                             if (grade := table.grades[(student.id, a)]) is not None), most)
            for student in table.students}


def waiting_for_a_person(gradebook, table: GradeTable) -> dict[str, list[str]]:
    """{student id: [assignment, ...]} whose counted submission (in an open nbgrader ``gradebook``) still has a grade
    only a person can give, so its score is exported as it stands (an unscored submission's zeros, an ungraded
    written answer's 0).  One query, whatever the class's size."""
    from nbgrader.api import Assignment, Student, SubmittedAssignment
    waiting_editions = set(gradebook.db.query(Student.id, Assignment.name)
                           .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
                           .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                           .filter(SubmittedAssignment.needs_manual_grade))
    waiting: dict[str, list[str]] = {}
    for (student, assignment), grade in sorted(table.grades.items()):
        if grade is not None and (student, grade.edition) in waiting_editions:
            waiting.setdefault(student, []).append(assignment)
    return waiting


def _number(value: float):
    """A score as an LMS reads it: 24 rather than 24.0, at most four decimals (numbers stay numbers: inert)."""
    return int(value) if float(value).is_integer() else round(value, 4)


def _score(grade: Grade | None):
    return "" if grade is None else _number(grade.score)


def _canvas_name(student: Student) -> str:
    names = [name for name in (student.last_name, student.first_name) if name]
    return ", ".join(names) if names else student.id


def rows(table: GradeTable, format: str) -> list[list]:
    """The file's rows, the header first, every cell inert (:func:`spreadsheet.cell`)."""
    if format == "canvas":
        out = [CANVAS_IDENTITY + table.assignments]
        out += [[_canvas_name(s), "", "", s.id, ""] + [_score(table.grades[(s.id, a)]) for a in table.assignments]
                for s in table.students]
    elif format == "moodle":
        out = [MOODLE_IDENTITY + table.assignments]
        out += [[s.first_name, s.last_name, s.id, s.email] + [_score(table.grades[(s.id, a)])
                                                             for a in table.assignments] for s in table.students]
    elif format == "long":
        out = [LONG_COLUMNS]
        for s in table.students:
            for a in table.assignments:
                grade = table.grades[(s.id, a)]
                known = [] if grade is None else [grade.edition, SUBMITTED, _number(grade.raw_score),
                                                  _number(grade.late_penalty), _number(grade.score)]
                out.append([s.id, s.last_name, s.first_name, s.email, a]
                           + (known or ["", MISSING, "", "", ""])
                           + [_number(table.max_scores[a]), "" if grade is None else grade.timestamp or ""])
    else:
        raise UnknownFormat(f"unknown format {format!r}: one of {', '.join(FORMATS)}")
    return [out[0]] + [spreadsheet.row(row) for row in out[1:]]


def write_table(table: GradeTable, format: str, to: Path) -> Path:
    written = rows(table, format)  # an unknown format stops here, before any file is touched
    to = Path(to)
    with open(to, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(written)
    return to


def write(course: Course, format: str, to: Path) -> Path:
    """The grades of the course's gradebook in ``format``, written to ``to``: each assignment students were given
    (:func:`offered`)."""
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url) as gb:
        return write_table(grade_table(gb, course, offered(gb, course)[0]), format, to)
