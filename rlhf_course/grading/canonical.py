"""The canonical copy of a submission: the one notebook the instructor sees, that is graded, run for
feedback and rendered on every page.  It is rebuilt from the release, never taken from the student:

- the release's cells, in the release's order, with the release's cell ids and nbgrader metadata;
  every locked cell (text, set-up, visible and hidden tests) is the release's own;
- of the student's notebook, only text: each answer cell's source (code answers and written answers,
  each cut at :data:`MAX_SOURCE_CHARS` with a note), and the cells the student added, as plain cells
  after the release cell they followed (no metadata, fresh ids; a raw cell becomes a text block);
- the release's notebook metadata (kernelspec, language_info): nothing a student writes in
  metadata (``magics_language``, ``raw_mimetype``, widget state, tags, ...) reaches a renderer;
- no outputs: the only outputs a page shows come from the course's own run of this copy
  (:func:`with_outputs`), bounded and allowlisted by :mod:`safe_html`;
- markdown attachments only as PNG, JPEG or GIF images within their bound.

A grade cell the student moved, duplicated, deleted or turned into another type is put back in its
place (from the release, or the student's last copy of a duplicated answer: the one a run from the
top defines last) and flagged for a person with the reason; so is every edit of a locked cell (spaces at a
line's end and blank lines around its text aside) or of nbgrader metadata, compared as Validate compares them
(:mod:`rlhf_course.course.release_cells`).  The student's feedback page says, above each cell put back, why
(:func:`restored_cells`).  Nothing here runs student code or imports torch.
"""
from __future__ import annotations

import base64
import binascii
import bisect
import copy
import json
import re

import nbformat

from rlhf_course.course import notebooks
from rlhf_course.course.release_cells import (DELETED, EDITED, METADATA_EDITED, TYPE_CHANGED,
                                              edited_metadata, is_students_cell, locked_cell_edited, text as _text)

MAX_SOURCE_CHARS = 64 * 1024  # characters of one cell's source kept (a release cell has at most a few KiB)
MAX_IMAGE_CHARS = 2 * 2**20  # base64 characters of one image kept
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")  # the images an output may carry (and a page show)


def size_text(chars: int) -> str:
    return f"{chars / 1024:,.1f} KiB" if chars >= 1024 else f"{chars} characters"


def cut_note(what: str, chars: int, kept: int) -> str:
    return f"[{what} was cut: it was {size_text(chars)}; the first {size_text(kept)} are shown]"


def is_base64_image(value: str) -> bool:
    try:
        base64.b64decode(value.replace("\n", ""), validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


LOCKED_CELL_EDITED = "the locked cell was edited (restored from the release)"  # flags, after "<grade id>: "
GRADE_CELL_DELETED = "was deleted (put back from the release)"
_RESTORED_FLAGS = {  # the flag's text after "<grade id>: ", as _grade_cell writes it
    EDITED: re.compile(re.escape(LOCKED_CELL_EDITED)),
    DELETED: re.compile(re.escape(GRADE_CELL_DELETED)),
    METADATA_EDITED: re.compile(r"nbgrader metadata [a-z_, ]+ was edited \(restored from the release\)"),
    TYPE_CHANGED: re.compile(r"answer cell changed from \w+ to .+ \(the release's cell is shown and graded; "
                             r"the student's text is not\)", re.DOTALL),
}


def restored_cells(flags: list[str], grade_ids) -> dict[str, list[str]]:
    """The release grade cells that :func:`canonical_copy` put back as the release's although the student's copy
    differed, read from its ``flags``: grade id (one of ``grade_ids``, the release's) -> why, each one of
    :data:`EDITED` (a locked cell's text or type), :data:`DELETED`, :data:`METADATA_EDITED`, :data:`TYPE_CHANGED` (an
    answer cell's type), in the flags' order.  Only whole flags of that shape count: a grade id the student made up
    names no release cell."""
    found: dict[str, list[str]] = {}
    for flag in flags:
        gid, _, reason = flag.partition(": ")
        if gid not in grade_ids:
            continue
        for kind, pattern in _RESTORED_FLAGS.items():
            if pattern.fullmatch(reason):
                found.setdefault(gid, []).append(kind)
    return found


def canonical_copy(nb, release_nb) -> tuple[nbformat.NotebookNode, list[str]]:
    """``(copy, flags)``: the canonical copy of the submitted notebook ``nb`` (see the module's text)
    and what a person should look at, each flag starting with the grade id it concerns."""
    flags: list[str] = []
    release_ids = [notebooks.grade_id(cell) for cell in release_nb.cells]
    position = {gid: index for index, gid in enumerate(release_ids) if gid}
    occurrences: dict[str, list] = {}
    extra_after: dict[str | None, list] = {}  # release grade id (None: the top) -> the student's cells after it
    anchor = None
    for cell in nb.cells:
        gid = notebooks.grade_id(cell)
        if gid in position:
            occurrences.setdefault(gid, []).append(cell)
            anchor = gid
            continue
        if gid:
            flags.append(f"{gid}: unknown nbgrader cell (kept as an ordinary cell, without its nbgrader metadata)")
        extra_after.setdefault(anchor, []).append(cell)
    flags += _moved(nb, position)

    out = nbformat.v4.new_notebook(metadata=copy.deepcopy(release_nb.metadata))
    out.nbformat_minor = max(release_nb.get("nbformat_minor", 5), 5)  # cell ids
    extra = 0
    for cell in extra_after.get(None, []):
        extra += 1
        out.cells.append(_plain_cell(cell, extra, flags))
    for original, gid in zip(release_nb.cells, release_ids):
        out.cells.append(_grade_cell(original, gid, occurrences.get(gid, []), flags))
        for cell in extra_after.get(gid, []):
            extra += 1
            out.cells.append(_plain_cell(cell, extra, flags))
    return out, flags


def _moved(nb, position: dict[str, int]) -> list[str]:
    """Grade cells out of the release's order: those outside a longest run in order (first copies)."""
    order, seen = [], set()
    for cell in nb.cells:
        gid = notebooks.grade_id(cell)
        if gid in position and gid not in seen:
            seen.add(gid)
            order.append(gid)
    in_place = _longest_increasing(order, position)
    return [f"{gid}: was moved (put back in its place from the release)" for gid in order if gid not in in_place]


def _longest_increasing(order: list[str], position: dict[str, int]) -> set[str]:
    tails: list[int] = []  # smallest release position ending a run of each length
    tail_index: list[int] = []
    previous = [-1] * len(order)
    for i, gid in enumerate(order):
        value = position[gid]
        k = bisect.bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_index.append(i)
        else:
            tails[k], tail_index[k] = value, i
        previous[i] = tail_index[k - 1] if k > 0 else -1
    kept, i = set(), tail_index[-1] if tail_index else -1
    while i >= 0:
        kept.add(order[i])
        i = previous[i]
    return kept


def _grade_cell(original, gid: str, copies: list, flags: list[str]):
    """One release grade cell in the canonical copy: the release's, with the student's text for an answer."""
    cell = copy.deepcopy(original)
    if "outputs" in cell:
        cell.outputs, cell.execution_count = [], None
    if not copies:
        flags.append(f"{gid}: {GRADE_CELL_DELETED}")
        return cell
    if len(copies) > 1:
        flags.append(f"{gid}: appears {len(copies)} times (the last copy is kept, in its place)")
    theirs = copies[-1]
    changed = edited_metadata(theirs, original)
    if changed:
        flags.append(f"{gid}: nbgrader metadata {', '.join(changed)} was edited (restored from the release)")
    if not is_students_cell(original):
        if locked_cell_edited(theirs, original):
            flags.append(f"{gid}: {LOCKED_CELL_EDITED}")
        return cell
    if theirs.get("cell_type") != original.cell_type:
        flags.append(f"{gid}: answer cell changed from {original.cell_type} to {theirs.get('cell_type')} "
                     "(the release's cell is shown and graded; the student's text is not)")
        return cell
    cell.source = _bounded(_text(theirs.get("source")), original.cell_type, gid, flags)
    if original.cell_type == "markdown":
        cell.pop("attachments", None)
        attachments = _images(theirs.get("attachments"))
        if attachments:
            cell.attachments = attachments
    return cell


def _plain_cell(cell, number: int, flags: list[str]):
    """A cell the student added: its text only, as a code or markdown cell with no metadata."""
    where = f"extra cell {number}"
    source = _bounded(_text(cell.get("source")), cell.get("cell_type"), where, flags)
    if cell.get("cell_type") == "code":
        new = nbformat.v4.new_code_cell(source)
    elif cell.get("cell_type") == "markdown":
        new = nbformat.v4.new_markdown_cell(source)
        attachments = _images(cell.get("attachments"))
        if attachments:
            new.attachments = attachments
    else:  # raw (or unknown): shown as text, never passed to the page as it is
        fence = "~" * max(3, 1 + max(map(len, re.findall("~+", source)), default=0))
        new = nbformat.v4.new_markdown_cell(f"{fence}text\n{source}\n{fence}")
    new.id = f"student-added-{number}"
    return new


def _bounded(source: str, cell_type, where: str, flags: list[str]) -> str:
    if len(source) <= MAX_SOURCE_CHARS:
        return source
    flags.append(f"{where}: its text was cut to its first {MAX_SOURCE_CHARS // 1024} KiB")
    note = cut_note("this cell", len(source), MAX_SOURCE_CHARS)
    return source[:MAX_SOURCE_CHARS] + ("\n# " + note if cell_type == "code" else "\n\n*" + note + "*")


def _images(attachments) -> dict:
    """Markdown attachments kept: PNG, JPEG or GIF, base64, within the image bound, plain names."""
    if not isinstance(attachments, dict):
        return {}
    kept = {}
    for name, bundle in attachments.items():
        if not isinstance(name, str) or not name.isprintable() or len(name) > 200 or not isinstance(bundle, dict):
            continue
        images = {mime: value for mime, value in bundle.items()
                  if mime in IMAGE_TYPES and isinstance(value, str) and len(value) <= MAX_IMAGE_CHARS
                  and is_base64_image(value)}
        if images:
            kept[name] = images
    return kept


def with_outputs(canonical, executed_json: str | None, max_cells: int):
    """The canonical copy with the outputs of the course's run of it (``executed_json``, written in
    the sandbox: untrusted).  Only outputs and execution counts are taken, cell by cell, and only
    when the run's cells are the canonical copy's (same number, ids and types); otherwise the copy
    has no outputs and a note says why.  Outputs are bounded and allowlisted afterwards
    (:func:`safe_html.bound_notebook`)."""
    nb = copy.deepcopy(canonical)
    if not executed_json:
        return nb, False
    try:
        ran = json.loads(executed_json)
        cells = ran["cells"]
        if not isinstance(cells, list) or len(cells) != len(nb.cells) or len(cells) > max_cells:
            raise ValueError("other cells")
        for mine, theirs in zip(nb.cells, cells):
            if not isinstance(theirs, dict) or theirs.get("cell_type") != mine.cell_type or theirs.get("id") != mine.get("id"):
                raise ValueError("other cells")
        for mine, theirs in zip(nb.cells, cells):
            if mine.cell_type != "code":
                continue
            outputs = theirs.get("outputs", [])
            mine.outputs = [nbformat.from_dict(o) for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []
            count = theirs.get("execution_count")
            mine.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
        nbformat.validate(nb)
        return nb, True
    except Exception:
        return copy.deepcopy(canonical), False
