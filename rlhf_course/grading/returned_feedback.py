"""A feedback page that is returned is the grade the gradebook holds now.

`make grade` writes each page with the scores of that moment; a person then grades the written answers (or
overrides a test's score) in the Formgrader, which changes the gradebook and not the page.  So every page is
written with its *grading record* beside it (:func:`keep_record`: the submission's result, the canonical copy of
its notebook and the copy as the grader ran it, and the grades the page shows), and the course's
``release_feedback`` (:class:`rlhf_course.exchange.release.StrictExchangeReleaseFeedback`, the Formgrader's
*Release feedback* too) first rewrites every page whose grades changed since (:func:`refresh_pages`): the
gradebook's scores and comments put into the recorded result, the page rendered again from the recorded
notebooks.  No student code runs: nothing is graded again.

A page without a readable record (written by an older version of the course, or by hand) cannot be shown to
be current: the release is refused, naming the command that rewrites it (:class:`StalePages`).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rlhf_course.grading.results import SubmissionResult, result_from_dict
from rlhf_course.grading.settings import Course

RECORD_SUFFIX = ".feedback.json"  # autograded/<student>/<assignment>/.<notebook>.feedback.json


def record_path(course: Course, student: str, assignment: str, notebook: str) -> Path:
    """Where the grading record of one page is kept: beside the autograded copy, a hidden file (nbgrader's
    commands skip it, ``c.CourseDirectory.ignore``), never in feedback/, which is released."""
    return course.folder("autograded", student, assignment) / f".{notebook.removesuffix('.ipynb')}{RECORD_SUFFIX}"


def page_grades(result: SubmissionResult) -> dict:
    """The grades a page of ``result`` shows, as JSON data: each test's score, each written answer's score
    (None: not graded yet) and comment, the late penalty (points or None)."""
    return json.loads(json.dumps({
        "cells": {gid: cell.score for gid, cell in result.cells.items()},
        "written": {gid: [w.get("score"), w.get("comment") or ""] for gid, w in result.written.items()},
        "penalty": result.deadline.get("penalty"),
    }))


def keep_record(course: Course, result: SubmissionResult) -> Path:
    """Write the grading record of the page just written for ``result`` (JSON: the result without its deadline,
    which is the gradebook's and read back on release, and the grades the page shows)."""
    data = asdict(result)
    data.pop("deadline", None)
    path = record_path(course, result.student, result.assignment, result.notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"result": data, "shown": page_grades(result)}))
    return path


class StalePages(RuntimeError):
    """Feedback pages that cannot be shown to hold the gradebook's grades: the message says which and what to run."""


def _read_record(path: Path) -> tuple[SubmissionResult, dict]:
    data = json.loads(path.read_text())
    return result_from_dict(data["result"]), data["shown"]


def _pages(course: Course, assignment: str, student: str) -> list[Path]:
    """feedback/<student>/<assignment>/*.html (``student``: one id or ``*``), as release_feedback finds them."""
    return sorted(course.folder("feedback").glob(f"{student}/{assignment}/*.html"))


def refresh_pages(course: Course, assignment: str, student: str = "*", log=None) -> list[str]:
    """Rewrite each feedback page of ``assignment`` (of ``student``, or everyone's) whose grades in the gradebook
    changed since it was written, from its grading record.  Returns one line per page rewritten.  Raises
    :class:`StalePages` (before rewriting anything) when a page has no readable record."""
    from nbgrader.api import Gradebook, MissingEntry

    from rlhf_course.grading.feedback import write_feedback
    from rlhf_course.grading.gradebook import read_back

    records, unreadable = [], []
    for page in _pages(course, assignment, student):
        who = page.parent.parent.name
        path = record_path(course, who, assignment, page.stem)
        try:
            records.append((page, *_read_record(path)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = "no grading record" if isinstance(exc, OSError) else f"its grading record {path} is unreadable"
            unreadable.append(f"{page} ({why})")
    if unreadable:
        raise StalePages(
            "these feedback pages may not show the gradebook's current scores: " + "; ".join(unreadable)
            + f". Rewrite them with `make grade ASSIGNMENT={assignment}` (as root), then release feedback again.")
    said = []
    with Gradebook(course.db_url) as gb:
        for page, result, shown in records:
            try:
                read_back(gb, result)
            except MissingEntry:
                raise StalePages(f"{page}: the gradebook has no submission of {result.student} for {assignment}. "
                                 f"Grade it with `make grade ASSIGNMENT={assignment}` (as root), then release "
                                 "feedback again.") from None
            if page_grades(result) == shown:
                continue
            write_feedback(course, result)
            said.append(f"feedback for {result.student} on {assignment}/{page.stem} rewritten with the "
                        f"gradebook's current grades (a person graded since `make grade`)")
            if log is not None:
                log.info(said[-1])
    return said
