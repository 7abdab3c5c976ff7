"""What trusted grading writes into nbgrader's gradebook (through nbgrader's own API): scores per grade cell,
written answers left to a person, flags and automatic comments, the late penalty by the course's nbgrader plugin.
What it needs there before it starts is :func:`rlhf_course.grading.batch.complete_gradebook`'s."""
from __future__ import annotations

from pathlib import Path

from rlhf_course.grading.results import SCORED_STATES, SubmissionResult, printable


def submission_timestamp(submitted: Path):
    """When the student submitted, from nbgrader's timestamp.txt in ``submitted/<student>/<assignment>``
    (None if absent or unreadable)."""
    from nbgrader.utils import parse_utc
    path = submitted / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip())
    except (OSError, ValueError):
        return None


def record_in_gradebook(gb, result: SubmissionResult, timestamp=None, policy=None, granted=None) -> None:
    """Write the trusted scores per grade cell into an open nbgrader ``Gradebook``; flag every
    submission that needs a person, and mark for a manual grade only the cells the grader could not judge
    (:attr:`CellResult.judged`) and the written answers.  ``granted``
    (:class:`~rlhf_course.course.extension_record.Granted`): the extensions recorded, one of which a submission
    without an extension of its own gets (granted before the student submitted, whichever edition they chose)."""
    import warnings

    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import SAWarning

    notebook, assignment = result.notebook.removesuffix(".ipynb"), result.assignment
    needs_look = result.state not in SCORED_STATES or bool(result.flags)
    gb.update_or_create_student(result.student)
    try:
        submission = gb.find_submission(assignment, result.student)
        submission.timestamp = timestamp
    except MissingEntry:
        with warnings.catch_warnings():  # nbgrader's add_submission trips a harmless autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            submission = gb.add_submission(assignment, result.student, timestamp=timestamp)
    if submission.extension is None and granted is not None:
        submission.extension = granted.for_submission(result.student, assignment)
    submission_nb = gb.find_submission_notebook(notebook, assignment, result.student)
    grades, comments = _grades_and_comments(gb, submission_nb)
    for cell in result.cells.values():
        grade = grades.get(cell.grade_id) or gb.find_grade(cell.grade_id, notebook, assignment, result.student)
        grade.auto_score = cell.score  # a person's manual score and comments stay, as in nbgrader's SaveAutoGrades
        # a verdict needs no person; a cell the grader could not judge does, until a person scores it
        grade.needs_manual_grade = not cell.judged and grade.manual_score is None
    record_written_answers(result, grades, comments)
    submission_nb.flagged = needs_look
    seconds_late = submission.total_seconds_late  # nbgrader's: due date plus any extension granted
    submission_nb.late_submission_penalty = (
        policy.late_submission_penalty(result.student, result.score, seconds_late) or 0.0
        if (policy is not None and seconds_late > 0) else None)
    result.deadline = _deadline(submission, submission_nb)
    names = list(comments)
    for name, comment in comments.items():
        comment.auto_comment = cell_note(result, name, names)
    gb.db.commit()


def _deadline(submission, submission_nb) -> dict:
    """:attr:`SubmissionResult.deadline` from nbgrader's submission and submitted notebook."""
    return {"due": submission.assignment.duedate, "extension": submission.extension,
            "submitted": submission.timestamp, "seconds_late": submission.total_seconds_late,
            "penalty": submission_nb.late_submission_penalty}


def read_back(gb, result: SubmissionResult) -> None:
    """``result`` as the gradebook holds it now, changing nothing there: each test's score (a person's manual
    score wins, as in nbgrader's ``Grade.score``), each written answer's score and comment, the deadline and
    late penalty.  What a feedback page rewritten after a person graded in the Formgrader shows."""
    notebook = result.notebook.removesuffix(".ipynb")
    submission = gb.find_submission(result.assignment, result.student)
    submission_nb = gb.find_submission_notebook(notebook, result.assignment, result.student)
    grades, comments = _grades_and_comments(gb, submission_nb)
    for cell in result.cells.values():
        grade = grades.get(cell.grade_id)
        if grade is not None:
            given = grade.manual_score if grade.manual_score is not None else grade.auto_score
            cell.score = cell.score if given is None else float(given)
    for name, written in result.written.items():
        grade, comment = grades.get(name), comments.get(name)
        if grade is not None:
            written["score"] = grade.manual_score if grade.manual_score is not None else grade.auto_score
        written["comment"] = (comment.manual_comment if comment is not None else None) or ""
    result.deadline = _deadline(submission, submission_nb)


def _grades_and_comments(gb, submission_nb) -> tuple[dict, dict]:
    """The submitted notebook's grades and comments by cell name, each with its cell: two queries
    (reading them through nbgrader's lazy relationships costs one query per cell, every submission)."""
    from nbgrader.api import BaseCell, Comment, Grade
    from sqlalchemy.orm import joinedload, with_polymorphic

    cell = with_polymorphic(BaseCell, "*", flat=True)
    grades = gb.db.query(Grade).filter(Grade.notebook_id == submission_nb.id).options(
        joinedload(Grade.cell.of_type(cell))).all()
    comments = gb.db.query(Comment).filter(Comment.notebook_id == submission_nb.id).options(
        joinedload(Comment.cell.of_type(cell))).all()
    return {g.cell.name: g for g in grades}, {c.cell.name: c for c in comments}


def record_written_answers(result: SubmissionResult, grades: dict, comments: dict) -> None:
    """The written answers a person grades, recorded like nbgrader's SaveAutoGrades does: an answer left as
    released scores 0, any other needs a manual grade (and so does every one of an unreadable submission);
    a person's manual score and comments are never touched, and an answer they scored stays off the
    to-grade list (stock autograde puts it back on; `make grade` also refreshes the feedback pages).
    ``result.written`` gets each cell's points and the score and comment a person gave, for the feedback.
    ``grades`` and ``comments``: the submitted notebook's, by cell name."""
    for name, grade in grades.items():
        cell = grade.cell
        if cell.cell_type != "markdown":
            continue
        answered = result.written.get(cell.name, {}).get("answered")
        grade.auto_score = 0.0 if answered is False else None
        grade.needs_manual_grade = grade.auto_score is None and grade.manual_score is None
        comment = comments.get(cell.name)
        result.written[cell.name] = {
            "answered": answered, "points": float(cell.max_score),
            "score": grade.manual_score if grade.manual_score is not None else grade.auto_score,
            "comment": (comment.manual_comment if comment is not None else None) or ""}


def cell_note(result: SubmissionResult, cell: str, cells: list[str]) -> str | None:
    """The automatic comment the Formgrader shows under one answer cell: the review flags about
    this cell's code, plus what concerns the whole submission (its state when a person must look,
    flags about code outside the answer cells)."""
    lines = []
    if result.state not in SCORED_STATES:
        lines.append(f"[{result.state}] {result.detail}".strip())
    for flag in result.flags:
        where = flag.split(":", 1)[0]
        if where == cell or where not in cells:
            lines.append(f"review: {flag}")
    return printable("\n".join(lines))[:2000] or None
