"""Intake of a submission, before any of its code runs: the notebook read without following links and
within its limits, rebuilt as its canonical copy (:mod:`canonical`: what is graded, run and shown),
and the student's code scanned for what a person should look at.  Nothing here runs student code or imports torch.
"""
from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path

import nbformat

from rlhf_course.course import notebooks
from rlhf_course.course.errors import CourseError
from rlhf_course.grading.canonical import canonical_copy
from rlhf_course.course.limits import Limits
from rlhf_course.grading.results import MALFORMED, TOO_LARGE


def written_answers(nb, release_nb) -> dict[str, bool]:
    """Each written answer cell of the release (graded by a person): did the student change its text?"""
    mine = notebooks.cells_by_grade_id(nb)
    return {gid: gid in mine and mine[gid].source.strip() != cell.source.strip()
            for gid, cell in notebooks.cells_by_grade_id(release_nb).items() if notebooks.is_written_answer(cell)}


# ----------------------------------------------------------------------------- review flags

SUSPICIOUS_NAMES = {"get_ipython", "builtins", "__builtins__", "sys", "importlib", "ctypes", "subprocess",
                    "socket", "os", "shutil", "pathlib", "inspect", "gc", "signal", "threading", "multiprocessing"}
SUSPICIOUS_CALLS = {"open", "exec", "eval", "compile", "__import__", "globals", "setattr", "getattr"}


def student_code(nb) -> dict[str, str]:
    """Every code cell the student could write in a canonical copy: answer cells by grade id, the
    cells they added as "extra cell N" (as :mod:`canonical` numbers them)."""
    code = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if notebooks.is_answer_cell(cell):
            code[notebooks.grade_id(cell)] = cell.source
        elif not notebooks.nbgrader_metadata(cell):
            number = str(cell.get("id", "")).removeprefix("student-added-")
            code[f"extra cell {number if number.isdigit() else index + 1}"] = cell.source
    return code


def review_flags(answer_cells: dict[str, str]) -> list[str]:
    """Student code a person should look at: it reaches outside the three functions' job."""
    flags = []
    for gid, source in answer_cells.items():
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            if gid.startswith("extra cell"):
                continue  # IPython magics and shell escapes are not Python
            flags.append(f"{gid}: does not parse ({exc.msg})")
            continue
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found |= {f"imports {m}" for m in modules if m.split(".")[0] in SUSPICIOUS_NAMES}
            elif isinstance(node, ast.Name) and node.id in SUSPICIOUS_NAMES:
                found.add(f"uses {node.id}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SUSPICIOUS_CALLS:
                found.add(f"calls {node.func.id}()")
            elif isinstance(node, ast.Attribute) and node.attr in ("modules", "input_transformers_cleanup",
                                                                    "set_custom_exc", "showtraceback"):
                found.add(f"touches .{node.attr}")
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id in ("torch", "math", "np", "numpy", "F", "nn")
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                found.add("reassigns a library function")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ".." in node.value and "/" in node.value:
                found.add("names a path outside its folder")
        flags += [f"{gid}: {item}" for item in sorted(found)]
    return flags


# ----------------------------------------------------------------------------- reading a submission

class Unreadable(CourseError):
    def __init__(self, state: str, detail: str):
        super().__init__(detail)
        self.state = state


def read_submitted_notebook(folder: Path, notebook: str, limits: Limits) -> str:
    """The submitted notebook's text, opened as a regular file without following any link (a
    student's symlink never makes the grader read another file) and refused above the size limit.
    ``folder``: ``submitted/<student>/<assignment>`` as the course directory names it."""
    for part in (folder.parent, folder):
        if part.is_symlink():
            raise Unreadable(MALFORMED, f"{part.parent.name}/{part.name} is a symbolic link")
    try:
        fd = os.open(folder / notebook, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Unreadable(MALFORMED, f"the notebook cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(MALFORMED, "the notebook is not a regular file")
        if info.st_size > limits.submitted_notebook_bytes:
            raise Unreadable(TOO_LARGE, f"the notebook is {info.st_size / 2**20:.1f} MiB "
                                        f"(limit {limits.submitted_notebook_bytes / 2**20:g} MiB)")
        data = handle.read(limits.submitted_notebook_bytes + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable(MALFORMED, "the notebook is not UTF-8 text") from None


def cell_count(text: str) -> int | None:
    """How many cells the notebook's text holds (a version 4 notebook's ``cells``, a version 3 one's
    worksheets' cells), read before any validation; None when the text is not a notebook's JSON."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("cells"), list):
        return len(data["cells"])
    worksheets = data.get("worksheets")
    if isinstance(worksheets, list):
        return sum(len(sheet["cells"]) for sheet in worksheets
                   if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list))
    return None


def parse_notebook(text: str, limits: Limits):
    """The notebook from its text, validated once, within the cell limit (else :class:`Unreadable`).
    The cells are counted first: validating each costs tens of microseconds, so a notebook of a hundred
    thousand tiny cells within the size limit would cost seconds before the cell limit refused it."""
    cells = cell_count(text)
    if cells is not None and cells > limits.cells:
        raise Unreadable(TOO_LARGE, f"the notebook has {cells} cells (limit {limits.cells})")
    try:
        nb = notebooks.parse(text)
    except notebooks.NotANotebook as exc:
        raise Unreadable(MALFORMED, f"the notebook cannot be read: {exc}"[:500]) from None
    if len(nb.cells) > limits.cells:
        raise Unreadable(TOO_LARGE, f"the notebook has {len(nb.cells)} cells (limit {limits.cells})")
    return nb


def take_in(folder: Path, notebook: str, release_nb, limits: Limits):
    """Intake of one submitted notebook: read safely, parsed, and rebuilt as its canonical copy
    (:mod:`canonical`: the release's cells and order, the student's answers as text).  Returns
    ``(canonical copy, flags)``, the flags being what was put back and what of the student's code a
    person should review; raises :class:`Unreadable` for a notebook that cannot be read."""
    nb = parse_notebook(read_submitted_notebook(folder, notebook, limits), limits)
    canonical, repaired = canonical_copy(nb, release_nb)  # nothing a student shaped counts, nothing earned is lost
    return canonical, repaired + review_flags(student_code(canonical))
