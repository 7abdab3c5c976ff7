"""What an instructor's source notebook holds that no student may see, for the tests: the model answers to
the written questions (a student's answers, in tests that fill them in), every solution line and every hidden
test line (which neither the release nor the package may contain)."""
from __future__ import annotations

import re

from rlhf_course.course.notebooks import SOLUTION_BLOCK, grade_id, is_written_answer

HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.DOTALL)


def written_solutions(source_nb) -> dict[str, str]:
    """The instructor's model answers to the written questions, solution markers removed: grade_id -> text."""
    return {grade_id(cell): SOLUTION_BLOCK.sub("", cell.source).strip("\n")
            for cell in source_nb.cells if is_written_answer(cell)}


def solution_lines(source_nb) -> list[str]:
    """Every non-blank line inside a ``### BEGIN/END SOLUTION`` block, stripped."""
    lines = []
    for cell in source_nb.cells:
        for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.DOTALL):
            lines += [line.strip() for line in block.splitlines() if line.strip()]
    return lines


def hidden_test_lines(source_nb) -> list[str]:
    """Every non-blank line inside a ``### BEGIN/END HIDDEN TESTS`` block, stripped."""
    lines = []
    for cell in source_nb.cells:
        for block in HIDDEN_BLOCK.findall(cell.source):
            lines += [line.strip() for line in block.splitlines() if line.strip()]
    return lines
