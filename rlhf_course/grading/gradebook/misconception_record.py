"""Which catalogued misconceptions trusted grading named for each submission, kept for the class report.

The gradebook has no field for them, and a feedback page is the student's, in their language, to be read
by them: so trusted grading keeps its own record, ``misconceptions.json`` in the course root beside
``grading_report.csv`` (a file, not a table: it has to work with a PostgreSQL gradebook that only nbgrader's
schema may touch, and it stays readable by a person)::

    {"<assignment>": {"<student>": {"<notebook>": {"timestamp": "<the submission's, as the gradebook has it>",
                                                   "named": true,
                                                   "misconceptions": [{"entry": ..., "function": ..., "name": ...}]}}}}

Every graded submission replaces its own record (students not graded this time keep theirs).  ``named`` is
false when the course turned naming off (``c.TrustedGrading.name_misconceptions``) or the submission was not
scored.  The submission's timestamp is kept so that a record outlived by a later grading that names nothing
(stock ``nbgrader autograde``) is known as stale by the report (:func:`named_for`).  Names are the catalogue's
English ones: the report is the instructor's.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rlhf_course.course.settings import Course
from rlhf_course.grading.results import SCORED_STATES, SubmissionResult

RECORD = "misconceptions.json"


def read(course: Course) -> dict:
    """The whole record ({} when there is none yet); a damaged file is an error that says where it is."""
    path = course.root / RECORD
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not the misconception record trusted grading writes ({exc}): move it "
                         f"aside; the next `make grade` writes a new one") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not the misconception record trusted grading writes (not an object)")
    return data


def record(course: Course, results: list[SubmissionResult], timestamps: dict[tuple[str, str], str],
           named_by_course: bool) -> Path:
    """Replace the records of these ``results`` (``timestamps``: (assignment, student) -> the gradebook's
    submission timestamp as text), atomically (a reader never sees half a file)."""
    path = course.root / RECORD
    data = read(course)
    for result in results:
        data.setdefault(result.assignment, {}).setdefault(result.student, {})[result.notebook] = {
            "timestamp": timestamps.get((result.assignment, result.student), ""),
            "named": bool(named_by_course and result.state in SCORED_STATES),
            "misconceptions": [{"entry": m.entry, "function": m.function, "name": m.name}
                               for m in result.misconceptions],
        }
    fd, temporary = tempfile.mkstemp(prefix=f".{RECORD}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False, indent=1, sort_keys=True)
    os.chmod(temporary, 0o640)
    os.replace(temporary, path)
    return path


def named_for(data: dict, assignment: str, student: str, timestamp: str) -> list[dict] | None:
    """The misconceptions named for one submission (every notebook's), or None when nothing was named: no
    trusted grading recorded it, naming was off, it was not scored, or it was graded again since (stock
    autograde) with another timestamp."""
    notebooks = data.get(assignment, {}).get(student)
    if not notebooks:
        return None
    found = []
    for entry in notebooks.values():
        if not entry.get("named") or entry.get("timestamp", "") != timestamp:
            return None
        found += entry.get("misconceptions", [])
    return found
