"""grading_report.csv across batches: a batch of one assignment (`make grade ASSIGNMENT=grpo`) or one student
(`--student`) replaces the rows of what it graded and keeps every other submission's state and reason, which the
class report points to ("grading_report.csv says why")."""
from __future__ import annotations

import csv

from rlhf_course.grading.gradebook.report import write_report
from rlhf_course.grading.results import CellResult, SubmissionResult


def _result(student, assignment, state, detail="", stage="sandbox start"):
    result = SubmissionResult(student=student, state=state, assignment=assignment, notebook=f"{assignment}.ipynb",
                              detail=detail, cells={"a": CellResult("a", 2.0, 0.0 if detail else 2.0, "")})
    result.timings = {stage: 0.5}
    return result


def _rows(path):
    return {(row["assignment"], row["student"]): row for row in csv.DictReader(path.open(newline=""))}


def test_a_later_batch_keeps_the_rows_it_did_not_grade(tmp_path):
    path = tmp_path / "grading_report.csv"
    write_report(path, [_result("eve", "rlhf", "timed out", "compute_gae timed out"),
                        _result("=fay", "rlhf", "malformed notebook", "NotJSONError"),
                        _result("bob", "rlhf", "failed tests", "lost 10 points")])
    write_report(path, [_result("bob", "rlhf", "graded"), _result("ada", "grpo", "graded", stage="feedback run")])
    rows = _rows(path)
    assert set(rows) == {("rlhf", "eve"), ("rlhf", "'=fay"), ("rlhf", "bob"), ("grpo", "ada")}
    assert rows[("rlhf", "eve")]["state"] == "timed out" and rows[("rlhf", "eve")]["detail"] == "compute_gae timed out"
    assert rows[("rlhf", "'=fay")]["detail"] == "NotJSONError"  # kept as written: inert, not quoted twice
    assert rows[("rlhf", "bob")]["state"] == "graded" and rows[("rlhf", "bob")]["detail"] == ""  # replaced
    assert rows[("grpo", "ada")]["s: feedback run"] == "0.5" and rows[("rlhf", "eve")]["s: sandbox start"] == "0.5"
    assert [key for key in _rows(path)] == sorted(rows)  # in (assignment, notebook, student) order
