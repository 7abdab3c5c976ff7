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


def write_report(path: Path, results: list[SubmissionResult]) -> Path:
    """One row per submission; the student's id, flags and detail carry text the student shaped, so every
    cell is made inert for a spreadsheet (scores and seconds stay numbers)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        stages = sorted({stage for r in results for stage in r.timings})
        writer.writerow(["assignment", "notebook", "student", "state", "score", "max_score", "seconds", "review_flags", "detail",
                         *[f"s: {stage}" for stage in stages]])
        for r in sorted(results, key=lambda r: (r.assignment, r.notebook, r.student)):
            writer.writerow(spreadsheet.row([r.assignment, r.notebook, one_line(r.student), r.state, r.score, r.max_score, round(r.seconds, 2),
                             one_line(" | ".join(r.flags)), one_line((r.detail or "")[:500]),
                             *[round(r.timings.get(stage, 0.0), 3) for stage in stages]]))
    return path
