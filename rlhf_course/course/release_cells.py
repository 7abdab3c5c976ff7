"""How a student's copy of a release's grade cell differs from the release's, in the ways that make grading take
the release's cell (or its nbgrader metadata) instead of the student's: one comparison, used by grading's canonical
copy (rlhf_course/grading/canonical.py), which puts such a cell back and flags it, and by Validate
(rlhf_course/classroom/patient_validate.py), which tells the student before they submit.

The student's copy of a grade cell is the last cell of their notebook with its grade id (the one a run from the
top defines last).  A locked cell (release text, set-up, visible and hidden tests) is edited when its type or its
lines differ (spaces at a line's end and blank lines around the text aside: an editor adds or trims those, and they
change nothing a cell does); an answer cell's text is the student's, but not its type; nbgrader's metadata is the
release's in every grade cell.  Outputs never count.
"""
from __future__ import annotations

from rlhf_course.course import notebooks

NBGRADER_KEYS = ("grade", "solution", "locked", "points", "schema_version", "task")

# Why grading takes a release grade cell (or its metadata) rather than the student's copy
EDITED = "edited"  # a locked cell's text or type
DELETED = "deleted"
METADATA_EDITED = "metadata edited"
TYPE_CHANGED = "type changed"  # an answer cell's


def is_students_cell(release_cell) -> bool:
    """A cell whose text is the student's: a code answer or a written answer."""
    return notebooks.is_answer_cell(release_cell) or notebooks.is_written_answer(release_cell)


def text(source) -> str:
    """A cell's source as one string (a notebook may hold it as a list of lines, or as anything at all)."""
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return source if isinstance(source, str) else ""


def same_text(theirs: str, release: str) -> bool:
    """Whether a locked cell's text is the release's: the same lines, spaces at a line's end and blank lines at the
    start or end aside."""
    return _lines(theirs) == _lines(release)


def _lines(source: str) -> list[str]:
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def edited_metadata(theirs, release_cell) -> list[str]:
    """The nbgrader keys (of :data:`NBGRADER_KEYS`) whose value in the student's copy is not the release's."""
    mine, release = notebooks.nbgrader_metadata(theirs), notebooks.nbgrader_metadata(release_cell)
    return [key for key in NBGRADER_KEYS if mine.get(key) != release.get(key)]


def locked_cell_edited(theirs, release_cell) -> bool:
    return theirs.get("cell_type") != release_cell.cell_type or not same_text(text(theirs.get("source")),
                                                                             release_cell.source)


def changes(release_cell, theirs) -> list[str]:
    """Why grading takes ``release_cell`` (or its metadata) rather than ``theirs``, the student's copy (None: they
    have none): :data:`DELETED`, else any of :data:`METADATA_EDITED`, :data:`EDITED`, :data:`TYPE_CHANGED`."""
    if theirs is None:
        return [DELETED]
    found = [METADATA_EDITED] if edited_metadata(theirs, release_cell) else []
    if not is_students_cell(release_cell):
        return found + ([EDITED] if locked_cell_edited(theirs, release_cell) else [])
    return found + ([TYPE_CHANGED] if theirs.get("cell_type") != release_cell.cell_type else [])


def release_cell_changes(nb, release_nb) -> dict[str, tuple[int, list[str]]]:
    """The release's grade cells grading takes rather than the student's copy in ``nb``: grade id -> (the cell's
    index in ``nb``, or in the release when it was deleted; :func:`changes`), in the release's order."""
    last = {}
    for index, cell in enumerate(nb.cells):
        gid = notebooks.grade_id(cell)
        if gid:
            last[gid] = index
    found = {}
    for index, release_cell in enumerate(release_nb.cells):
        gid = notebooks.grade_id(release_cell)
        if not gid:
            continue
        mine = last.get(gid)
        why = changes(release_cell, None if mine is None else nb.cells[mine])
        if why:
            found[gid] = (index if mine is None else mine, why)
    return found
