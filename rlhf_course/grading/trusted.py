"""Trusted grading of one submission: scores are decided here, outside the student's process.

The student's answer cells run only in the sandbox (:mod:`sandbox_runner`), which returns plain
observations; the instructor's checks (``instructor/rlhf_hidden_checks.py``) judge them in this
process.  Nothing the student's code does (patched comparison functions, IPython input
transformers, custom exception handlers) can reach the judging.
"""
from __future__ import annotations

import ast
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import notebooks
from rlhf_course.grading.observe import Case, Observation, from_wire
from rlhf_course.grading.sandbox import Limits, Sandbox, SandboxDied, SandboxTimeout
from rlhf_course.grading.sandbox_runner import FEEDBACK_NOTEBOOK

GRADED, FAILED_TESTS = "graded", "failed tests"
TIMED_OUT, CRASHED, MEMORY_LIMIT, MALFORMED = "timed out", "crashed", "memory limit", "malformed notebook"
GRADER_ERROR = "grader error"
SCORED_STATES = (GRADED, FAILED_TESTS)  # every other state needs an instructor's look


@dataclass
class CellResult:
    grade_id: str
    points: float
    score: float
    message: str  # what the student sees: the property, and what went wrong if it failed


@dataclass
class SubmissionResult:
    student: str
    state: str
    cells: dict[str, CellResult] = field(default_factory=dict)
    detail: str = ""
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    executed_notebook: str | None = None  # JSON of the student's notebook as run for feedback

    @property
    def score(self) -> float:
        return sum(cell.score for cell in self.cells.values())

    @property
    def max_score(self) -> float:
        return sum(cell.points for cell in self.cells.values())


# ----------------------------------------------------------------------------- structure

def structure_problems(nb, release_nb) -> list[str]:
    """Deleted or duplicated grade cells, changed cell types or metadata, edited locked cells."""
    problems = []
    expected = {notebooks.grade_id(c): c for c in release_nb.cells if notebooks.grade_id(c)}
    seen: dict[str, int] = {}
    for cell in nb.cells:
        gid = notebooks.grade_id(cell)
        if gid:
            seen[gid] = seen.get(gid, 0) + 1
    for gid, count in seen.items():
        if count > 1:
            problems.append(f"cell {gid} appears {count} times")
        if gid not in expected:
            problems.append(f"unknown nbgrader cell {gid}")
    for gid, original in expected.items():
        if gid not in seen:
            problems.append(f"cell {gid} was deleted")
            continue
        cell = next(c for c in nb.cells if notebooks.grade_id(c) == gid)
        if cell.cell_type != original.cell_type:
            problems.append(f"cell {gid} changed from {original.cell_type} to {cell.cell_type}")
        mine, theirs = cell.metadata.get("nbgrader", {}), original.metadata.get("nbgrader", {})
        for key in ("grade", "solution", "locked", "points"):
            if mine.get(key) != theirs.get(key):
                problems.append(f"cell {gid}: nbgrader metadata '{key}' was changed")
        if theirs.get("locked") and cell.source != original.source:
            problems.append(f"locked cell {gid} was edited")
    return problems


# ----------------------------------------------------------------------------- review flags

SUSPICIOUS_NAMES = {"get_ipython", "builtins", "__builtins__", "sys", "importlib", "ctypes", "subprocess",
                    "socket", "os", "shutil", "pathlib", "inspect", "gc", "signal", "threading", "multiprocessing"}
SUSPICIOUS_CALLS = {"open", "exec", "eval", "compile", "__import__", "globals", "setattr", "getattr"}


def review_flags(answer_cells: dict[str, str]) -> list[str]:
    """Answer code a person should look at: it reaches outside the three functions' job."""
    flags = []
    for gid, source in answer_cells.items():
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
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


# ----------------------------------------------------------------------------- grading

def _is_memory_error(text: str | None) -> bool:
    return bool(text) and ("MemoryError" in text or "can't allocate memory" in text or "not enough memory" in text)


class _Session:
    """Runs the checks' cases through the sandbox and judges the observations here."""

    def __init__(self, sandbox: Sandbox, limits: Limits):
        self.sandbox, self.limits, self.memory_errors = sandbox, limits, 0

    def observe(self, function: str, case: Case) -> Observation:
        reply = self.sandbox.request({"kind": "call", "function": function, "args": list(case.args),
                                      "grad_wrt": list(case.grad_wrt)}, self.limits.call_seconds)
        observation = from_wire(reply)
        if _is_memory_error(observation.error):
            self.memory_errors += 1
        return observation

    def evaluate(self, checks_module, check) -> str | None:
        def recall(case: Case) -> Observation:
            return self.observe(check.function, case)
        for case in check.cases():
            detail = checks_module.judge_observation(check, case, recall(case), recall)
            if detail is not None:
                return detail
        return None


def grade_submission(course_root: Path, student: str, checks_module, slot: int = 0,
                     limits: Limits = Limits(), scratch_root: Path | None = None) -> SubmissionResult:
    """Grade one student's submission; never raises for anything the submission contains."""
    start = time.monotonic()
    try:
        result = _grade(course_root, student, checks_module, slot, limits, scratch_root)
    except Exception as exc:  # a bug of ours: make it visible, keep the batch going
        result = SubmissionResult(student, GRADER_ERROR, detail=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    result.seconds = time.monotonic() - start
    return result


def _grade(course_root, student, checks_module, slot, limits, scratch_root) -> SubmissionResult:
    folder = course_root / "submitted" / student / ASSIGNMENT
    release_nb = notebooks.read(course_root / "release" / ASSIGNMENT / NOTEBOOK)
    points = {check.id: check.points for check in checks_module.CHECKS.values()}
    try:
        nb = nbformat.read(str(folder / NOTEBOOK), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:
        return _unscored(student, MALFORMED, f"the notebook cannot be read: {type(exc).__name__}: {exc}"[:500], points)
    problems = structure_problems(nb, release_nb)
    if problems:
        return _unscored(student, MALFORMED, "; ".join(problems), points)

    answers = {notebooks.grade_id(c): c.source for c in nb.cells if notebooks.is_answer_cell(c)}
    setup = notebooks.cells_by_grade_id(release_nb)["setup"].source  # ours, not the student's copy
    result = SubmissionResult(student, GRADED, flags=review_flags(answers))
    scratch = Path(tempfile.mkdtemp(prefix=f"grade-{student}-", dir=scratch_root))
    try:
        workdir = scratch / "submission"
        shutil.copytree(folder, workdir, symlinks=True)  # a link stays a link: never copy what it points to
        job = {"setup": setup, "answer_cells": answers, "notebook": NOTEBOOK, "execute_notebook": True}
        _score_all(result, checks_module, workdir, job, slot, limits)
        if result.state == GRADED and result.score < result.max_score:
            result.state = FAILED_TESTS
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _score_all(result: SubmissionResult, checks_module, workdir: Path, job: dict, slot: int, limits: Limits) -> None:
    """Run every check.  A call that hangs or kills the sandbox costs the rest of that function's
    checks; the sandbox is restarted for the other functions, so their points still count."""
    pending = list(checks_module.CHECKS.values())
    broken: dict[str, str] = {}  # function -> why its remaining checks were not run
    memory_errors = 0
    while pending:
        try:
            sandbox = Sandbox(workdir, job, slot, limits).start()
        except (SandboxTimeout, SandboxDied) as exc:
            # The answer cells themselves hang or kill the process: nothing can be called.
            state = TIMED_OUT if isinstance(exc, SandboxTimeout) else CRASHED
            why = f"the answer cells did not finish running ({state})"
            _worse(result, state, why)
            for check in pending:
                result.cells[check.id] = CellResult(check.id, check.points, 0.0, f"{check.message}: not run, {why}")
            return
        with sandbox:
            session = _Session(sandbox, limits)
            while pending:
                check = pending.pop(0)
                if check.function in broken:
                    result.cells[check.id] = CellResult(check.id, check.points, 0.0,
                                                        f"{check.message}: not run, {broken[check.function]}")
                    continue
                try:
                    detail = session.evaluate(checks_module, check)
                except SandboxTimeout:
                    detail = f"no answer within {limits.call_seconds:g} s (an infinite loop?)"
                    broken[check.function] = f"{check.function} timed out"
                    _worse(result, TIMED_OUT, f"{check.function} timed out in {check.id}")
                except SandboxDied as exc:
                    detail = f"the process running {check.function} died ({exc})"
                    broken[check.function] = f"{check.function} crashed"
                    _worse(result, CRASHED, f"{check.function} killed its process in {check.id}: {exc.log[-300:]}")
                result.cells[check.id] = CellResult(
                    check.id, check.points, 0.0 if detail else float(check.points),
                    check.message if detail is None else f"{check.message}. What went wrong: {detail}")
                if check.function in broken:
                    break  # this sandbox is gone: start a fresh one for what is left
            memory_errors += session.memory_errors
            if not pending and not broken:
                _finish_feedback(sandbox, limits, workdir, result)
    if memory_errors:
        _worse(result, MEMORY_LIMIT, f"{memory_errors} call(s) ran out of memory "
                                     f"(limit {limits.memory_bytes / 2**30:g} GiB of address space)")


_SEVERITY = [GRADED, FAILED_TESTS, MEMORY_LIMIT, CRASHED, TIMED_OUT, MALFORMED, GRADER_ERROR]


def _worse(result: SubmissionResult, state: str, detail: str) -> None:
    """Keep the most severe state; collect every reason."""
    if _SEVERITY.index(state) > _SEVERITY.index(result.state):
        result.state = state
    result.detail = f"{result.detail}; {detail}" if result.detail else detail


def _finish_feedback(sandbox: Sandbox, limits: Limits, workdir: Path, result: SubmissionResult) -> None:
    """Ask the runner to execute the student's notebook; a failure here costs no points."""
    try:
        sandbox.request({"kind": "finish"}, limits.feedback_seconds)
        executed = workdir / FEEDBACK_NOTEBOOK
        if executed.is_file() and executed.stat().st_size < 20 * 2**20:
            result.executed_notebook = executed.read_text()
    except (SandboxTimeout, SandboxDied) as exc:
        why = "it timed out" if isinstance(exc, SandboxTimeout) else f"its process died: {exc.log[-300:]}"
        result.detail = (result.detail + "; " if result.detail else "") + \
            f"the feedback copy of the notebook could not be run to the end ({why})"


def _unscored(student: str, state: str, detail: str, points: dict[str, int]) -> SubmissionResult:
    result = SubmissionResult(student, state, detail=detail)
    result.cells = {gid: CellResult(gid, p, 0.0, f"not graded: {state}") for gid, p in points.items()}
    return result
