"""The instructor's view of the class: one self-contained HTML page and one CSV of the same numbers per base
assignment (its language editions folded in, the edition a column), in ``class_report/`` of the course root.

    python -m rlhf_course.grading report [ASSIGNMENT ...]     # also written after every `grade`

Everything comes from nbgrader's gradebook (the course's ``CourseDirectory.db_url``), the misconception record
trusted grading keeps (:mod:`misconception_record`) and the strict collect's ``collect_report.csv``:

* the score distribution (the score after the late penalty), overall and per edition, and the manual grading
  still to do (grades nbgrader marks ``needs_manual_grade``: written answers without a person's score, and the
  autograded cells of a submission that could not be scored);
* per hidden test cell (each autograded code grade cell): points, pass rate (full points), mean score, and
  its discrimination: the **point-biserial correlation** between passing the cell (1/0) and the rest of the
  student's raw score (the total before the late penalty, minus this cell's score: the corrected item-total
  correlation, so a cell is not correlated with itself).  Flags, each with its severity (:data:`FLAG_SEVERITY`):
  nobody passes (red), negative discrimination (red: better students fail it more often, usually a broken test or
  an unclear instruction), everybody passes (grey: worth knowing, rarely worth acting on).  Negative
  discrimination is ``r < -2 / sqrt(n)`` (:func:`negative_discrimination_threshold`): r's standard error for a
  test unrelated to ability is about 1/sqrt(n), so a fixed threshold would flag such a test in a third of classes
  of ten and one in twenty of sixty; two standard errors keep it near 2.5 % at every size
  (tests/grading/test_class_report_office_hours.py measures it).  Below ``MIN_STUDENTS`` submissions nothing is
  flagged and no discrimination computed (the page says so); none either when everyone, or no one, passes;
* the roster (nbgrader's students table): how many submitted, and who did not;
* the students by score after the late penalty, lowest first (who to see first), beside the same table in id
  order; each student id links to their submission in the Formgrader (``c.ClassReportSettings.formgrader_url``);
* the misconceptions named, counted, with the students behind each; "not named" for a submission trusted
  grading did not name (stock ``nbgrader autograde`` names none);
* lateness: each submission's time against its due date and extension, the penalty applied; collect's
  entries not collected (refused, or a newer submission left for --update) and flagged times;
* one row per student, linking their feedback page (a path relative to the report, into ``feedback/``).

The page is in English, or Chinese (``--language=zh-CN``, ``c.ClassReportSettings.language``); the CSV is the same
in both.  The page has no script and asks no host for anything: its plots are PNGs inside it (matplotlib, Agg), and a
Content-Security-Policy forbids anything else.  Student ids and every text a student shaped are data: the
template escapes them (Jinja's autoescape), the CSV makes them inert for a spreadsheet (:mod:`spreadsheet`).
"""
from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import math
import os
import statistics
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from traitlets import Unicode
from traitlets.config import Configurable

from rlhf_course.course.errors import CourseError
from rlhf_course.grading import editions
from rlhf_course.grading.pages import TEMPLATES
from rlhf_course.grading.gradebook import misconception_record
from rlhf_course.course import notebooks
from rlhf_course import spreadsheet
from rlhf_course.course.settings import Course
from rlhf_course.i18n import CHINESE, ENGLISH, TABLES, cjk_font, t

FOLDER = "class_report"
MIN_STUDENTS = 5  # fewer submissions: no discrimination and no flag at all (one student decides a pass rate)
NOBODY, EVERYBODY, NEGATIVE = "nobody passes", "everybody passes", "negative discrimination"
FLAG_SEVERITY = {NOBODY: "red", NEGATIVE: "red", EVERYBODY: "grey"}  # red: look at the test; grey: for the record
COLLECT_REPORT = "collect_report.csv"  # StrictExchangeCollect.report_name's default
# The collect rows the report shows: a student can make inbound entries by the thousand, and the page (rebuilt after
# every `make grade`) stays small; collect_report.csv keeps them all.
COLLECT_ROWS_SHOWN = 50
CSV_COLUMNS = ["assignment", "section", "edition", "item", "measure", "value"]
ALL = "all"


class ClassReportSettings(Configurable):
    """The class report (``python -m rlhf_course.grading report``, and after every ``grade``)."""

    language = Unicode(ENGLISH, help="The report's language: 'en' or 'zh-CN' (its sentences, headings and plot "
                                     "labels, and the misconceptions' names).").tag(config=True)
    formgrader_url = Unicode("http://localhost:8888/formgrader",
                             help="The Formgrader the report's student ids link into (a submission is "
                                  "<formgrader_url>/submissions/<id>/); on a JupyterHub e.g. "
                                  "https://hub.example/user/<instructor>/formgrader.").tag(config=True)


class ReportError(CourseError, ValueError):
    """A report that cannot be written as asked (an unknown assignment); nothing was written."""


# ----------------------------------------------------------------------------- the numbers

@dataclass
class StudentRow:
    """One student's counted submission of the assignment (the latest among its editions)."""
    student: str
    edition: str  # the nbgrader assignment submitted (rlhf or rlhf_zh)
    timestamp: dt.datetime | None  # naive UTC, as the gradebook keeps it
    due: dt.datetime | None
    extension: dt.timedelta | None
    raw_score: float  # every grade cell, before the late penalty
    penalty: float
    max_score: float
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # autograded grade id -> (score, points)
    to_do: list[str] = field(default_factory=list)  # grade ids that need a person
    misconceptions: list[dict] | None = None  # None: not named
    feedback: list[str] = field(default_factory=list)  # links relative to the report's folder
    submission_ids: list[str] = field(default_factory=list)  # nbgrader's submitted notebooks, by notebook name
    formgrader: str = ""  # the Formgrader's page of the (first) submitted notebook
    unreadable: list[str] = field(default_factory=list)  # notebooks trusted grading could not read: nothing to grade

    @property
    def score(self) -> float:
        return max(0.0, self.raw_score - self.penalty)

    @property
    def deadline(self) -> dt.datetime | None:
        return self.due + self.extension if self.due and self.extension else self.due

    @property
    def hours_late(self) -> float:
        if self.timestamp is None or self.deadline is None:
            return 0.0
        return max(0.0, (self.timestamp - self.deadline).total_seconds() / 3600)

    @property
    def extension_hours(self) -> float:
        return self.extension.total_seconds() / 3600 if self.extension else 0.0


@dataclass
class Distribution:
    edition: str
    students: int
    mean: float | None
    median: float | None
    sd: float | None  # sample standard deviation (n - 1)
    low: float | None
    high: float | None


@dataclass
class HiddenTest:
    grade_id: str
    points: float
    students: int
    passed: int
    mean_score: float | None
    discrimination: float | None  # point-biserial r with the rest of the raw score; None: undefined
    flags: list[str]

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.students if self.students else None


@dataclass
class ClassReport:
    assignment: str  # the base assignment
    editions: list[str]
    due: dt.datetime | None
    max_score: float
    rows: list[StudentRow]
    distributions: list[Distribution]
    tests: list[HiddenTest]
    to_do: dict[str, list[str]]  # grade id -> students whose grade needs a person
    misconceptions: dict[str, dict]  # catalogue entry -> {"name", "function", "students"}
    not_named: list[str]  # students for whom nothing was named
    collect: list[dict]  # collect_report.csv rows of these editions that were refused or flagged, the first ones
    written_at: dt.datetime
    roster: list[str] = field(default_factory=list)  # every student of nbgrader's students table
    missing: list[str] = field(default_factory=list)  # of the roster, who submitted no edition
    collect_left_out: int = 0  # such rows beyond COLLECT_ROWS_SHOWN

    @property
    def by_score(self) -> list[StudentRow]:
        """The rows by score after the late penalty, lowest first (ties by id)."""
        return sorted(self.rows, key=lambda r: (r.score, r.student))

    @property
    def links(self) -> dict[str, str]:
        """Student id -> their submission's page in the Formgrader."""
        return {r.student: r.formgrader for r in self.rows if r.formgrader}

    @property
    def flagging(self) -> bool:
        return len(self.rows) >= MIN_STUDENTS

    @property
    def threshold(self) -> float | None:
        return negative_discrimination_threshold(len(self.rows)) if self.flagging else None


def distribution(edition: str, scores: list[float]) -> Distribution:
    if not scores:
        return Distribution(edition, 0, None, None, None, None, None)
    return Distribution(edition, len(scores), statistics.fmean(scores), statistics.median(scores),
                        statistics.stdev(scores) if len(scores) > 1 else None, min(scores), max(scores))


def negative_discrimination_threshold(n: int) -> float:
    """Two standard errors below 0: r's standard error is about 1/sqrt(n) for a test unrelated to ability."""
    return -2.0 / math.sqrt(n)


def discrimination(passed: list[int], rest: list[float]) -> float | None:
    """Pearson's r between passing (1/0) and the rest of the score (the point-biserial correlation); None when
    either does not vary (the rest is a sum of floats: differences within rounding are no variation)."""
    if len(passed) < 2 or len(set(passed)) < 2:
        return None
    if max(rest) - min(rest) <= 1e-9 * max(1.0, abs(statistics.fmean(rest))):
        return None
    try:
        return statistics.correlation([float(p) for p in passed], rest)
    except statistics.StatisticsError:
        return None


def hidden_test(grade_id: str, rows: list[StudentRow]) -> HiddenTest:
    scored = [r for r in rows if grade_id in r.cells]
    points = max((r.cells[grade_id][1] for r in scored), default=0.0)
    passed = [int(r.cells[grade_id][0] >= r.cells[grade_id][1]) for r in scored]
    rest = [r.raw_score - r.cells[grade_id][0] for r in scored]
    n = len(scored)
    flags = []
    r_pb = discrimination(passed, rest) if n >= MIN_STUDENTS else None
    if n >= MIN_STUDENTS:
        if sum(passed) == 0:
            flags.append(NOBODY)
        if sum(passed) == n:
            flags.append(EVERYBODY)
        if r_pb is not None and r_pb < negative_discrimination_threshold(n):
            flags.append(NEGATIVE)
    mean = statistics.fmean(r.cells[grade_id][0] for r in scored) if scored else None
    return HiddenTest(grade_id, points, n, sum(passed), mean, r_pb, flags)


def base_assignments(course: Course) -> tuple[dict[str, list[str]], set[str]]:
    """Base assignment -> the gradebook's assignments that are it or its editions (the base first), for every
    assignment the gradebook knows; and the base assignments with at least one submission."""
    from nbgrader.api import Gradebook
    base = {e.assignment: e.base for e in editions.editions(course)}
    grouped: dict[str, list[str]] = {}
    submitted = set()
    with Gradebook(course.db_url) as gb:
        for assignment in gb.assignments:
            name = base.get(assignment.name, assignment.name)
            grouped.setdefault(name, []).append(assignment.name)
            if assignment.num_submissions:
                submitted.add(name)
    return {name: sorted(group, key=lambda a: (a != name, a)) for name, group in sorted(grouped.items())}, submitted


def _cell_order(course: Course, assignment: str) -> list[str]:
    """Grade ids in the order of the released notebooks (the order students meet them)."""
    order = []
    for path in sorted(course.folder("release", assignment=assignment).glob("*.ipynb")):
        order += [gid for gid in map(notebooks.grade_id, notebooks.read(path).cells) if gid]
    return order


def _stamp(moment: dt.datetime | None) -> str:
    return moment.isoformat() if moment else ""


def _gradebook_rows(course: Course, group: list[str]) -> tuple[list[StudentRow], dt.datetime | None, float]:
    """Every counted submission of the group's assignments (the latest per student), read in three queries;
    the due date and the points of the base assignment."""
    from nbgrader.api import (Assignment, Grade, GradeCell, Gradebook, Notebook, Student, SubmittedAssignment,
                              SubmittedNotebook)
    with Gradebook(course.db_url) as gb:
        db = gb.db
        submissions = (db.query(SubmittedAssignment.id, Assignment.name, Student.id, SubmittedAssignment.timestamp,
                                Assignment.duedate, SubmittedAssignment.extension)
                       .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                       .join(Student, SubmittedAssignment.student_id == Student.id)
                       .filter(Assignment.name.in_(group)).all())
        penalty_rows = (db.query(SubmittedNotebook.assignment_id, SubmittedNotebook.late_submission_penalty,
                                 Notebook.name, SubmittedNotebook.id)
                        .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
                        .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                        .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                        .filter(Assignment.name.in_(group)).all())
        grades = (db.query(SubmittedAssignment.id, GradeCell.name, GradeCell.cell_type, GradeCell.max_score,
                           Grade.auto_score, Grade.manual_score, Grade.extra_credit, Grade.needs_manual_grade)
                  .select_from(Grade)
                  .join(GradeCell, Grade.cell_id == GradeCell.id)
                  .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                  .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                  .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                  .filter(Assignment.name.in_(group)).all())
        assignments = {a.name: a for a in gb.assignments if a.name in group}
        base = assignments[group[0]]
        due, max_score = base.duedate, float(base.max_score)
    penalties: dict[str, float] = {}
    for submission_id, penalty, _, _ in penalty_rows:
        penalties[submission_id] = penalties.get(submission_id, 0.0) + (penalty or 0.0)
    notebooks_of: dict[str, list[tuple[str, str]]] = {}
    for submission_id, _, name, notebook_id in penalty_rows:
        notebooks_of.setdefault(submission_id, []).append((name, notebook_id))
    by_submission: dict[str, list] = {}
    for grade in grades:
        by_submission.setdefault(grade[0], []).append(grade[1:])
    def when(submission) -> tuple:  # the latest counts, as in grades.csv; undated ones count least
        return submission[3] is not None, submission[3] or dt.datetime.min
    latest: dict[str, tuple] = {}
    for submission in submissions:
        student = submission[2]
        if student not in latest or when(submission) > when(latest[student]):
            latest[student] = submission
    rows = []
    for submission_id, edition, student, timestamp, duedate, extension in latest.values():
        row = StudentRow(student, edition, timestamp, duedate, extension or None, 0.0,
                         penalties.get(submission_id, 0.0), 0.0)
        for name, cell_type, points, auto, manual, extra, needs_person in by_submission.get(submission_id, []):
            score = (manual if manual is not None else auto if auto is not None else 0.0)
            score += (extra or 0.0) if (manual is not None or auto is not None) else 0.0
            row.raw_score += score
            row.max_score += float(points or 0.0)
            if cell_type == "code" and points:
                row.cells[name] = (float(score), float(points))
            if needs_person:
                row.to_do.append(name)
        row.feedback = [f"{edition}/{name}" for name, _ in sorted(notebooks_of.get(submission_id, []))]
        row.submission_ids = [notebook_id for _, notebook_id in sorted(notebooks_of.get(submission_id, []))]
        rows.append(row)
    return sorted(rows, key=lambda r: r.student), due, max_score


def _unreadable_notebooks(course: Course, rows: list[StudentRow]) -> None:
    """Each row's notebooks trusted grading could not read (their grading record's state): no autograded copy,
    nothing the Formgrader can show to grade by hand (``row.feedback``: still ``<edition>/<notebook>``)."""
    from rlhf_course.grading.pages.grading_record import recorded_state
    from rlhf_course.grading.results import UNREADABLE_STATES
    for row in rows:
        if not set(row.to_do) & set(row.cells):  # scored: its tests need no person (and its record is not read)
            continue
        row.unreadable = [notebook for edition, _, notebook in (where.partition("/") for where in row.feedback)
                          if (recorded_state(course, row.student, edition, notebook) or ("",))[0] in UNREADABLE_STATES]


def _feedback_links(course: Course, rows: list[StudentRow], report_folder: Path) -> None:
    """Each row's feedback pages that exist, as URLs relative to the report's folder (each part quoted: an id
    is the student's)."""
    feedback = course.folder("feedback").resolve()
    for row in rows:
        links = []
        for where in row.feedback:
            edition, notebook = where.split("/", 1)
            page = course.folder("feedback", row.student, edition) / f"{notebook}.html"
            # an id is only a folder name inside feedback/: one that would lead out of it gets no link
            if page.resolve().is_relative_to(feedback) and page.is_file():
                relative = os.path.relpath(page, report_folder)
                links.append("/".join(urllib.parse.quote(part) for part in Path(relative).parts))
        row.feedback = links


def _roster(course: Course) -> list[str]:
    """Every student id of nbgrader's students table (the class, whether they submitted or not)."""
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url) as gb:
        return sorted(student.id for student in gb.students)


def _formgrader_links(rows: list[StudentRow], formgrader_url: str) -> None:
    """Each row's link to its first submitted notebook in the Formgrader (nbgrader's submission ids are uuids)."""
    base = formgrader_url.rstrip("/")
    for row in rows:
        if row.submission_ids and base:
            row.formgrader = f"{base}/submissions/{urllib.parse.quote(row.submission_ids[0])}/"


def _collect_rows(course: Course, group: list[str]) -> list[dict]:
    """The collect report's rows of these assignments that were refused or flagged, all of them (its cells were
    made inert for a spreadsheet: the leading quote comes off for the page, which escapes them)."""
    name = course.config.get("StrictExchangeCollect", {}).get("report_name", COLLECT_REPORT)
    path = course.root / name
    if not path.is_file():
        return []
    def plain(value: str) -> str:
        return value[1:] if value.startswith("'") and value[1:].startswith(spreadsheet.FORMULA_STARTS) else value
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        found = [{k: plain(v or "") for k, v in row.items() if k} for row in csv.DictReader(handle)]
    return [row for row in found if row.get("assignment") in group
            and (row.get("status") == "refused" or row.get("flag"))]


def _names_in(course: Course, assignment: str, language: str) -> dict[str, str]:
    """Catalogue entry -> the misconception's name in ``language`` (the record keeps the name the student read)."""
    from rlhf_course.grading.misconceptions import catalogue
    try:
        found = catalogue(course, assignment)
    except Exception:  # a catalogue that does not load (grading said so): the recorded names stay
        return {}
    return {entry: m.name.get(language) or m.name.get(ENGLISH, "") for entry, m in found[1].items()} if found else {}


def build(course: Course, assignment: str, group: list[str], report_folder: Path | None = None,
          language: str = ENGLISH) -> ClassReport:
    """The numbers of one base assignment (``group``: it and its editions, as in the gradebook); the
    misconceptions named in ``language``."""
    rows, due, max_score = _gradebook_rows(course, group)
    _unreadable_notebooks(course, rows)
    _feedback_links(course, rows, report_folder or course.root / FOLDER)
    _formgrader_links(rows, ClassReportSettings(config=course.config).formgrader_url)
    roster = _roster(course)
    submitted = {row.student for row in rows}
    record = misconception_record.read(course)
    names = _names_in(course, assignment, language)
    misconceptions: dict[str, dict] = {}
    not_named = []
    for row in rows:
        row.misconceptions = misconception_record.named_for(record, row.edition, row.student, _stamp(row.timestamp))
        if row.misconceptions is None:
            not_named.append(row.student)
            continue
        for m in row.misconceptions:
            m["name"] = names.get(m["entry"], m["name"])  # recorded in the student's language
            entry = misconceptions.setdefault(m["entry"], {"name": m["name"], "function": m["function"],
                                                             "students": []})
            entry["students"].append(row.student)
    order = {gid: index for index, gid in enumerate(_cell_order(course, assignment))}

    def in_order(gid: str) -> tuple:  # as the notebook has them; a cell it does not have (any more) last
        return order.get(gid, len(order)), gid
    tests = [hidden_test(gid, rows) for gid in sorted({gid for row in rows for gid in row.cells}, key=in_order)]
    to_do: dict[str, list[str]] = {}
    for row in rows:
        for gid in row.to_do:
            to_do.setdefault(gid, []).append(row.student)
    distributions = [distribution(ALL, [r.score for r in rows])]
    distributions += [distribution(e, [r.score for r in rows if r.edition == e]) for e in group]
    collect = _collect_rows(course, group)
    return ClassReport(assignment, group, due, max_score, rows, distributions, tests,
                       {gid: to_do[gid] for gid in sorted(to_do, key=in_order)},
                       dict(sorted(misconceptions.items(), key=lambda kv: -len(kv[1]["students"]))),
                       not_named, collect[:COLLECT_ROWS_SHOWN], dt.datetime.now(dt.timezone.utc),
                       roster, [student for student in roster if student not in submitted],
                       max(0, len(collect) - COLLECT_ROWS_SHOWN))


# ----------------------------------------------------------------------------- the CSV

def _number(value: float | None):
    return "" if value is None else round(float(value), 6)


def csv_rows(report: ClassReport) -> list[list]:
    """The report's numbers, one per row: (assignment, section, edition, item, measure, value)."""
    a = report.assignment
    out = [[a, "roster", ALL, "", "students", len(report.roster)], [a, "roster", ALL, "", "submitted", len(report.rows)],
           [a, "roster", ALL, "", "missing", "; ".join(report.missing)]]
    for d in report.distributions:
        for measure in ("students", "mean", "median", "sd", "low", "high"):
            value = getattr(d, measure)
            out.append([a, "distribution", d.edition, "score", {"low": "min", "high": "max"}.get(measure, measure),
                        value if measure == "students" else _number(value)])
    out.append([a, "distribution", ALL, "score", "max_score", _number(report.max_score)])
    for test in report.tests:
        for measure, value in (("points", test.points), ("students", test.students), ("passed", test.passed),
                               ("pass_rate", test.pass_rate), ("mean_score", test.mean_score),
                               ("discrimination", test.discrimination)):
            out.append([a, "test", ALL, test.grade_id, measure, value if measure in ("students", "passed") else _number(value)])
        out.append([a, "test", ALL, test.grade_id, "flags", "; ".join(test.flags)])
    out.append([a, "manual", ALL, "", "to_do", sum(len(s) for s in report.to_do.values())])
    for gid, students in report.to_do.items():
        out.append([a, "manual", ALL, gid, "to_do", len(students)])
        out.append([a, "manual", ALL, gid, "students", "; ".join(students)])
    for entry, m in report.misconceptions.items():
        out.append([a, "misconception", ALL, entry, "students", len(m["students"])])
        out.append([a, "misconception", ALL, entry, "who", "; ".join(m["students"])])
    out.append([a, "misconception", ALL, "", "not_named", len(report.not_named)])
    for r in report.rows:
        for measure, value in (("timestamp", _stamp(r.timestamp)), ("deadline", _stamp(r.deadline)),
                               ("extension_hours", _number(r.extension_hours)), ("hours_late", _number(r.hours_late)),
                               ("raw_score", _number(r.raw_score)), ("penalty", _number(r.penalty)),
                               ("score", _number(r.score)), ("max_score", _number(r.max_score)),
                               ("manual_to_do", len(r.to_do)),
                               ("misconceptions", "not named" if r.misconceptions is None
                                else "; ".join(m["entry"] for m in r.misconceptions)),
                               ("feedback", " ".join(r.feedback))):
            out.append([a, "student", r.edition, r.student, measure, value])
    out.append([a, "lateness", ALL, "", "late", sum(1 for r in report.rows if r.hours_late > 0)])
    out.append([a, "lateness", ALL, "", "penalised", sum(1 for r in report.rows if r.penalty > 0)])
    out.append([a, "lateness", ALL, "", "extensions", sum(1 for r in report.rows if r.extension)])
    for c in report.collect:
        out.append([a, "collect", c.get("assignment", ""), c.get("entry", ""), c.get("status", ""),
                    c.get("reason") or c.get("flag", "")])
    if report.collect_left_out:
        out.append([a, "collect", ALL, "", "left out (collect_report.csv lists them)", report.collect_left_out])
    return out


def write_csv(path: Path, report: ClassReport) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for row in csv_rows(report):
            writer.writerow(spreadsheet.row(row))
    return path


# ----------------------------------------------------------------------------- the page

EDITION_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)  # constrained layout: no second (tight) layout pass
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _plot_style(language: str) -> dict:
    """matplotlib settings for a report in ``language``: a CJK font first for Chinese labels (DejaVu Sans behind it
    for the Latin glyphs); none for English, or when no CJK font is installed (the labels are English then)."""
    if language == ENGLISH or cjk_font() is None:
        return {}
    return {"font.family": "sans-serif", "font.sans-serif": [cjk_font(), "DejaVu Sans"], "axes.unicode_minus": False}


def _plot_language(language: str) -> str:
    return ENGLISH if language == ENGLISH or cjk_font() is None else language


def _styled(draw, report: ClassReport, language: str) -> str:
    """``draw(report, language)`` under the report's plot style, in English where no CJK font is installed."""
    import matplotlib
    with matplotlib.rc_context(_plot_style(language)):
        return draw(report, _plot_language(language))


def distribution_plot(report: ClassReport, language: str = ENGLISH) -> str | None:
    """Histogram of the scores after penalty, stacked by edition."""
    return _styled(_distribution_plot, report, language) if report.rows else None


def _distribution_plot(report: ClassReport, language: str) -> str:
    from matplotlib.figure import Figure
    figure = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = figure.add_subplot()
    top = max(report.max_score, max(r.score for r in report.rows), 1.0)
    bins = [top * i / 20 for i in range(21)]
    scores = [[r.score for r in report.rows if r.edition == e] for e in report.editions]
    ax.hist(scores, bins=bins, stacked=True, color=EDITION_COLOURS[:len(scores)],
            label=[f"{e} ({len(s)})" for e, s in zip(report.editions, scores)], edgecolor="white")
    ax.set_xlabel(t("score after late penalty (of {points})", language, points=f"{report.max_score:g}"))
    ax.set_ylabel(t("students", language))
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(frameon=False)
    ax.set_title(t("Score distribution, by edition", language))
    return _png(figure)


def tests_plot(report: ClassReport, language: str = ENGLISH) -> str | None:
    """Each hidden test's pass rate and discrimination side by side; flagged tests in red."""
    return _styled(_tests_plot, report, language) if report.tests else None


def _tests_plot(report: ClassReport, language: str) -> str:
    from matplotlib.figure import Figure
    n = len(report.tests)
    figure = Figure(figsize=(7.5, 0.8 + 0.28 * n), layout="constrained")
    rates, discs = figure.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": (1, 1)})
    ys = list(range(n))[::-1]
    colours = [_flag_colour(test) for test in report.tests]
    rates.barh(ys, [test.pass_rate or 0.0 for test in report.tests], color=colours)
    rates.set_yticks(ys, [test.grade_id for test in report.tests], fontsize=8)
    for y, test in zip(ys, report.tests):
        if not test.pass_rate:
            rates.text(0.02, y, t("nobody passes", language), va="center", fontsize=7, color="#c44e52")
    rates.set_xlim(0, 1)
    rates.set_ylim(-0.6, n - 0.4)
    rates.set_xlabel(t("pass rate", language))
    discs.barh(ys, [test.discrimination or 0.0 for test in report.tests], color=colours)
    for y, test in zip(ys, report.tests):
        if test.discrimination is None:
            discs.text(0.02, y, t("undefined", language), va="center", fontsize=7, color="#666")
    discs.axvline(0, color="black", linewidth=0.8)
    if report.threshold is not None:
        discs.axvline(report.threshold, color="#c44e52", linewidth=0.8, linestyle="--")
    discs.set_xlim(-1, 1)
    discs.set_xlabel(t("discrimination (point-biserial r)", language))
    figure.suptitle(t("Hidden tests (red: to look at; grey: everybody passes)", language), fontsize=10)
    return _png(figure)


def _flag_colour(test: HiddenTest) -> str:
    severities = {FLAG_SEVERITY[flag] for flag in test.flags}
    return "#c44e52" if "red" in severities else "#9a9a9a" if severities else "#4c72b0"


CONTENT_SECURITY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def render_html(report: ClassReport, language: str = ENGLISH) -> str:
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / "class_report"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v, digits=2: "" if v is None else f"{v:.{digits}f}"
    env.filters["when"] = lambda v: f"{v:%Y-%m-%d %H:%M} UTC" if v else "-"
    env.filters["translated"] = lambda text: t(text, language)
    from rlhf_course.exchange.deadlines import how_late
    # As the feedback page says it: the penalty counts every started hour, so "0.0" hours would sit beside one.
    env.filters["late_by"] = lambda row: how_late(row.hours_late * 3600, language) if row.hours_late > 0 else ""
    env.globals["_"] = lambda text, **fields: t(text, language, **fields)
    return env.get_template("index.html.j2").render(
        report=report, csp=CONTENT_SECURITY_POLICY, language=language,
        distribution_png=distribution_plot(report, language), tests_png=tests_plot(report, language),
        min_students=MIN_STUDENTS, severity=FLAG_SEVERITY,
        late=[r for r in report.rows if r.hours_late > 0 or r.penalty > 0 or r.extension])


# ----------------------------------------------------------------------------- writing

@dataclass
class Written:
    assignment: str
    html: Path
    csv: Path
    students: int


def write_reports(course: Course, assignments: list[str] | None = None,
                  language: str | None = None) -> list[Written]:
    """The page and CSV of each named assignment (a base assignment or one of its editions: its base's;
    default: every assignment of the gradebook with a submission), in ``class_report/``; the page in ``language``
    (default: ``c.ClassReportSettings.language``; the CSV's names are identifiers, the same in every language)."""
    language = language or ClassReportSettings(config=course.config).language
    if language != ENGLISH and language not in TABLES:
        raise ReportError(f"no class report in {language!r}: {ENGLISH} or {CHINESE}")
    groups, submitted = base_assignments(course)
    if assignments:
        by_name = {name: base for base, group in groups.items() for name in group}
        unknown = [a for a in assignments if a not in by_name]
        if unknown:
            raise ReportError(f"no assignment {', '.join(map(repr, unknown))} in the gradebook (known: "
                              f"{', '.join(sorted(by_name)) or 'none'})")
        wanted = list(dict.fromkeys(by_name[a] for a in assignments))
    else:
        wanted = [base for base in groups if base in submitted]
    folder = course.root / FOLDER
    folder.mkdir(exist_ok=True)
    written = []
    for base in wanted:
        report = build(course, base, groups[base], folder, language)
        html_path, csv_path = folder / f"{base}.html", folder / f"{base}.csv"
        html_path.write_text(render_html(report, language), encoding="utf-8")
        write_csv(csv_path, report)
        written.append(Written(base, html_path, csv_path, len(report.rows)))
    return written
