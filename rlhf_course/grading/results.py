"""What grading one submission produces, as plain data: its state, each autograded cell's score and
message, the flags a person should review.  Every writer (gradebook, feedback page, report, export)
reads these; nothing here imports torch, the sandbox or nbgrader, so the writers never do either.

The grader's own sentences are written in the submission's language when they are made
(:func:`note`, :func:`unscored`): a student of the Chinese edition reads Chinese, an instructor's
report keeps the state names, which are identifiers (``"timed out"``), in English.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from rlhf_course.i18n import ENGLISH, t
from rlhf_course.printable import printable

GRADED, FAILED_TESTS = "graded", "failed tests"
TIMED_OUT, CRASHED, MEMORY_LIMIT, MALFORMED = "timed out", "crashed", "memory limit", "malformed notebook"
TOO_LARGE, GRADER_ERROR = "too large", "grader error"
SCORED_STATES = (GRADED, FAILED_TESTS)  # every other state needs an instructor's look (at the cells not judged)
UNREADABLE_STATES = (MALFORMED, TOO_LARGE)  # no check ran and no copy of the cells exists: nothing to grade by hand
SEVERITY = (GRADED, FAILED_TESTS, MEMORY_LIMIT, CRASHED, TIMED_OUT, TOO_LARGE, MALFORMED, GRADER_ERROR)


@dataclass
class CellResult:
    grade_id: str
    points: float
    score: float
    message: str  # what the student sees: the property, and what went wrong if it failed (checks.Finding.public)
    detail: str = ""  # what the instructor sees when it says more than ``message`` (the whole finding)
    # False: the grader could not judge this cell (its call hung, killed its process or ran out of memory, its judge
    # could not decide, or it was not run), so its 0 waits for a person; True: the score is the grader's verdict
    judged: bool = True

    @property
    def instructor_message(self) -> str:
        return self.detail or self.message


@dataclass
class NamedMisconception:
    """A catalogued mistake the submission's lost cells point to (rlhf_course/grading/misconceptions.py):
    the catalogue's entry and the function it is about, then what the student reads, in their language."""
    entry: str
    function: str
    name: str
    explanation: str
    section: str  # the heading of the notebook section to re-read


@dataclass
class SubmissionResult:
    student: str
    state: str
    assignment: str = ""
    notebook: str = ""  # the file name, e.g. rlhf_building_blocks.ipynb
    language: str = ENGLISH  # of the assignment's edition: the language of every message the student reads
    cells: dict[str, CellResult] = field(default_factory=dict)
    detail: str = ""  # every reason, for the instructor (grading report, Formgrader)
    student_detail: str = ""  # the reasons a student may read: only the grader's own sentences
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    executed_notebook: str | None = None  # JSON of the canonical copy as run for feedback (written in the sandbox)
    canonical_notebook: str | None = None  # JSON of the canonical copy (intake; see canonical.py): what pages show
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage, for bench/grading.py
    # written answers a person grades: grade_id -> {"answered": bool}; the gradebook adds points, score, comment
    written: dict[str, dict] = field(default_factory=dict)
    misconceptions: list[NamedMisconception] = field(default_factory=list)  # named under the scores
    # from the gradebook, for the feedback's deadline line: due (naive UTC or None), extension (timedelta or None),
    # submitted (naive UTC or None), seconds_late (after the extension), penalty (points or None)
    deadline: dict = field(default_factory=dict)

    def timed(self, stage: str, since: float) -> float:
        now = time.monotonic()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - since
        return now

    @property
    def score(self) -> float:
        return sum(cell.score for cell in self.cells.values())

    @property
    def max_score(self) -> float:
        return sum(cell.points for cell in self.cells.values())


def note(result: SubmissionResult, text: str, student: str | None = None) -> None:
    """Add one reason to the submission's detail (kept in order, separated by '; '); ``student``: what the
    student's page says of it, composed by the grader alone (None: the page does not say it)."""
    result.detail = f"{result.detail}; {text}" if result.detail else text
    if student:
        result.student_detail = f"{result.student_detail}; {student}" if result.student_detail else student


def worse(result: SubmissionResult, state: str, detail: str, student: str | None = None) -> None:
    """Keep the most severe state; collect every reason (``student``: as in :func:`note`)."""
    if SEVERITY.index(state) > SEVERITY.index(result.state):
        result.state = state
    note(result, detail, student)


def failed_message(check_message: str, what_went_wrong: str, language: str) -> str:
    return check_message + t(". What went wrong: ", language) + what_went_wrong


def not_run_message(check_message: str, why: str, language: str) -> str:
    return check_message + t(": not run, ", language) + why


def unscored(student: str, state: str, detail: str, points: dict[str, float], language: str = ENGLISH,
             student_detail: str = "") -> SubmissionResult:
    """A submission no check could run on: every autograded cell 0 and not judged, each saying why
    (``student_detail``: what the student's page says of ``detail``)."""
    result = SubmissionResult(student, state, detail=detail, student_detail=student_detail, language=language)
    reason = t("not graded: {state}", language, state=t(state, language))
    result.cells = {gid: CellResult(gid, p, 0.0, reason, judged=False) for gid, p in points.items()}
    return result


def result_from_dict(data: dict) -> SubmissionResult:
    """The inverse of ``dataclasses.asdict`` (a result that came back from a Dask worker)."""
    data = dict(data)
    cells = {k: CellResult(**v) for k, v in data.pop("cells").items()}
    misconceptions = [NamedMisconception(**m) for m in data.pop("misconceptions", [])]
    return SubmissionResult(cells=cells, misconceptions=misconceptions, **data)


def one_line(text: str) -> str:
    return printable(text).replace("\n", " ").replace("\t", " ")
