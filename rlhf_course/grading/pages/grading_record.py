"""The grading record kept beside each feedback page: what the page was made from (the submission's result) and the
grades it shows, so that a page can be rewritten with the gradebook's current grades without grading again
(:mod:`rlhf_course.grading.pages.returned_feedback`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rlhf_course.grading.results import SubmissionResult
from rlhf_course.course.settings import Course

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


def recorded_state(course: Course, student: str, assignment: str, notebook: str) -> tuple[str, str] | None:
    """The state and detail the grading record of one notebook holds (``("malformed notebook", "the notebook
    cannot be read: ...")``), or None without a readable record (not graded by `make grade`)."""
    try:
        result = json.loads(record_path(course, student, assignment, notebook).read_text())["result"]
        return str(result["state"]), str(result.get("detail") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return None
