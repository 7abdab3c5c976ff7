"""The batch's outcome for a person: the table printed at the end and ``grading_report.csv``."""
from __future__ import annotations

import csv
from pathlib import Path

from rlhf_course import spreadsheet
from rlhf_course.grading.results import SubmissionResult, one_line

REPORT = "grading_report.csv"


def format_table(results: list[SubmissionResult]) -> str:
    several = len({(r.assignment, r.notebook) for r in results}) > 1
    lines = [(f"{'notebook':<28} " if several else "") + f"{'student':<24} {'state':<20} {'score':>11}  {'s':>5}  note"]
    for r in sorted(results, key=lambda r: (r.assignment, r.notebook, r.student)):
        note = (r.detail.splitlines()[0] if r.detail else "")[:60]
        if r.flags:
            note = (note + "; " if note else "") + f"REVIEW: {r.flags[0]}" + (f" (+{len(r.flags) - 1})" if len(r.flags) > 1 else "")
        where = f"{r.assignment}/{r.notebook.removesuffix('.ipynb')}"
        lines.append((f"{where:<28} " if several else "") + f"{one_line(r.student):<24} {r.state:<20} {r.score:>5.1f}/{r.max_score:<5.1f}  {r.seconds:>5.1f}  "
                     f"{one_line(note)}")
    counts = {}
    for r in results:
        counts[r.state] = counts.get(r.state, 0) + 1
    lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


COLUMNS = ["assignment", "notebook", "student", "state", "score", "max_score", "seconds", "review_flags", "detail"]


def write_report(path: Path, results: list[SubmissionResult]) -> Path:
    """One row per submission; the student's id, flags and detail carry text the student shaped, so every
    cell is made inert for a spreadsheet (scores and seconds stay numbers).  The rows an earlier batch wrote for
    submissions this one did not grade (another assignment, other students) are kept as they were written."""
    rows = []
    for r in results:
        values = spreadsheet.row([r.assignment, r.notebook, one_line(r.student), r.state, r.score, r.max_score,
                                  round(r.seconds, 2), one_line(" | ".join(r.flags)), one_line((r.detail or "")[:500])])
        rows.append({**dict(zip(COLUMNS, values)),
                     **{f"s: {stage}": round(seconds, 3) for stage, seconds in r.timings.items()}})
    graded_now = {_key(row) for row in rows}
    rows += [row for row in _earlier_rows(path) if _key(row) not in graded_now]
    stages = sorted({column for row in rows for column in row if column.startswith("s: ")})
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS + stages, restval=0.0, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(sorted(rows, key=_key))
    return path


def _key(row: dict) -> tuple[str, str, str]:
    return str(row["assignment"]), str(row["notebook"]), str(row["student"])


def _earlier_rows(path: Path) -> list[dict]:
    """The rows of the report an earlier batch wrote (none if there is none, or it is not one)."""
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            if not set(COLUMNS) <= set(reader.fieldnames or ()):
                return []
            return [row for row in reader if all(row.get(column) is not None for column in COLUMNS)]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
