"""Every CSV cell a student can shape is inert in a spreadsheet; the numbers we wrote stay numbers.
The collect report's test is in tests/exchange/test_collect_copy.py, the export's in test_editions.py."""
from __future__ import annotations

import csv

import pytest

from rlhf_course.grading.gradebook.report import write_report
from rlhf_course.grading.results import CellResult, SubmissionResult
from rlhf_course.spreadsheet import cell

FORMULA = '=HYPERLINK("http://evil.example";"open")'


@pytest.mark.parametrize("value, written", [
    (FORMULA, "'" + FORMULA), ("+1+cmd", "'+1+cmd"), ("-2+3", "'-2+3"), ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("'=already", "'=already"), ("alice", "alice"), ("a=b", "a=b"),
    ("", ""), (-2.0, -2.0), (3, 3), (None, None),
])
def test_text_beginning_like_a_formula_is_quoted_and_numbers_are_not(value, written):
    assert cell(value) == written


def test_the_grading_report_is_inert_and_keeps_its_numbers(tmp_path):
    result = SubmissionResult(student="=1+1", state="crashed", assignment="rlhf", notebook="rlhf.ipynb",
                              detail="@SUM(A1:A9) from the student's traceback", flags=[f"{FORMULA} in a message"],
                              cells={"a": CellResult("a", 2.0, -2.0, "")})
    path = write_report(tmp_path / "grading_report.csv", [result])
    (row,) = csv.DictReader(path.open(newline=""))
    assert row["student"] == "'=1+1" and row["detail"].startswith("'@SUM")
    assert row["review_flags"] == f"'{FORMULA} in a message"
    assert row["score"] == "-2.0" and row["max_score"] == "2.0"  # ours, a number: not quoted
