"""Reading and rewriting assignment notebooks by their nbgrader cell ids."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from rlhf_course.i18n import t

if TYPE_CHECKING:
    import nbformat
# nbformat is imported where it is used: its schema validator pulls in jsonschema's format checkers, a
# noticeable part of a process's start-up, which a caller that only looks at cells (grade_id, is_answer_cell)
# does not need.

SOLUTION_BLOCK = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def read(path: str | Path) -> nbformat.NotebookNode:
    import nbformat
    return nbformat.read(str(path), as_version=4)


class NotANotebook(ValueError):
    """Text nbformat cannot read as a version 4 notebook, or whose notebook its schema refuses; the message
    names the error's class and says why."""


def parse(text: str) -> nbformat.NotebookNode:
    """The notebook ``text`` holds, read and validated once (nbformat 4), else :class:`NotANotebook`: the one
    judgement of an unreadable notebook, the exchange's submit's and the grader's intake's alike."""
    import nbformat
    try:
        invalid: dict = {}  # reads validates; one validation, not two
        nb = nbformat.reads(text, as_version=4, capture_validation_error=invalid)
        if invalid:
            raise invalid["ValidationError"]
    except Exception as exc:
        raise NotANotebook(f"{type(exc).__name__}: {exc}") from None
    return nb


def nbgrader_metadata(cell) -> dict:
    """A cell's ``metadata.nbgrader`` when it is a mapping, else ``{}``: a submitted notebook may hold any
    JSON there (the notebook schema allows it), and a value of another type means no nbgrader cell."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    """The cell's nbgrader grade id: a non-empty string, else None (a list or a number names no cell)."""
    gid = nbgrader_metadata(cell).get("grade_id")
    return gid if isinstance(gid, str) and gid else None


def is_answer_cell(cell) -> bool:
    return cell.get("cell_type") == "code" and bool(nbgrader_metadata(cell).get("solution", False))


def is_written_answer(cell) -> bool:
    """A manually graded written answer: a markdown cell nbgrader marks solution and grade (a person scores it)."""
    meta = nbgrader_metadata(cell)
    return cell.get("cell_type") == "markdown" and bool(meta.get("solution", False)) and bool(meta.get("grade", False))


def cells_by_grade_id(nb) -> dict[str, nbformat.NotebookNode]:
    return {grade_id(cell): cell for cell in nb.cells if grade_id(cell)}


def points_of(nb, grade_ids) -> dict[str, float]:
    """What each named grade cell is worth: its ``nbgrader.points``, the one truth nbgrader records as the
    cell's max score.  Read from the course's own notebook (the release), never a student's copy."""
    cells = cells_by_grade_id(nb)
    return {gid: float(cells[gid].metadata["nbgrader"]["points"]) for gid in grade_ids}


def solution_answers(source_nb) -> dict[str, str]:
    """The instructor's answer cells, solution markers removed: grade_id -> source."""
    return {grade_id(cell): SOLUTION_BLOCK.sub("", cell.source)
            for cell in source_nb.cells if is_answer_cell(cell)}


def fill_answers(release_nb, answers: Mapping[str, str]):
    """A copy of a student notebook with the named answer cells (code or written) replaced, as a student would."""
    import nbformat
    nb = nbformat.from_dict(release_nb)
    cells = cells_by_grade_id(nb)
    unknown = set(answers) - set(cells)
    if unknown:
        raise KeyError(f"no answer cell with grade_id {sorted(unknown)}")
    for cell_id, source in answers.items():
        if not (is_answer_cell(cells[cell_id]) or is_written_answer(cells[cell_id])):
            raise ValueError(f"cell {cell_id!r} is not an answer cell")
        cells[cell_id].source = source.strip("\n")
    return nb
