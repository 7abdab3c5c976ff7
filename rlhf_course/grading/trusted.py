"""Trusted grading of one submission: scores are decided here, outside the student's process.

The student's answer cells run only in the sandbox (:mod:`sandbox_runner`), which returns plain
observations; the assignment's checks (``instructor/<assignment>_hidden_checks.py``) judge them in this
process.  Nothing the student's code does (patched comparison functions, IPython input
transformers, custom exception handlers) can reach the judging.
"""
from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import functools
import itertools
import json
import os
import stat
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from rlhf_course import ASSIGNMENT, NOTEBOOK, i18n
from rlhf_course.grading import editions, notebooks
from rlhf_course.grading.checks import judge_observation
from rlhf_course.grading.observe import Case, Observation, from_wire
from rlhf_course.grading.sandbox import (PIPELINE_BYTES, Limits, ProtocolViolation, Sandbox, SandboxDied, SandboxTimeout,
                                         encode_call_request)

GRADED, FAILED_TESTS = "graded", "failed tests"
TIMED_OUT, CRASHED, MEMORY_LIMIT, MALFORMED = "timed out", "crashed", "memory limit", "malformed notebook"
TOO_LARGE, GRADER_ERROR = "too large", "grader error"
# A submitted notebook larger than this, or with more cells, is not run (it is flagged for a person):
# the release has about 60 cells and 50 kB.  Rendering a feedback page stays within seconds below it.
MAX_NOTEBOOK_BYTES = 8 * 2**20
MAX_CELLS = 1000
SCORED_STATES = (GRADED, FAILED_TESTS)  # every other state needs an instructor's look
# A submission whose calls keep running close to the per-call limit (each just under it costs a worker
# that long, for no points) gets a shorter limit for the rest: after this many calls that took more
# than half the limit, or ran out of it, the limit is cut to a quarter (at least 1 s).
SLOW_CALLS = 3


def shorter_limits(limits: Limits) -> Limits:
    return dataclasses.replace(limits, call_seconds=max(1.0, limits.call_seconds / 4))


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
    assignment: str = ASSIGNMENT
    notebook: str = NOTEBOOK  # the file name, e.g. rlhf_building_blocks.ipynb
    cells: dict[str, CellResult] = field(default_factory=dict)
    detail: str = ""
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    executed_notebook: str | None = None  # JSON of the student's notebook as run for feedback
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage, for bench/grading.py
    # written answers a person grades: grade_id -> {"answered": bool}; the gradebook adds points, score, comment
    written: dict[str, dict] = field(default_factory=dict)

    def timed(self, stage: str, since: float) -> float:
        now = time.monotonic()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - since
        return now

    @property
    def score(self) -> float:
        return sum(cell.score for cell in self.cells.values())

    @property
    def max_score(self) -> float:
        return sum(cell.points for cell in self.cells.values())


# ----------------------------------------------------------------------------- structure

def structure_problems(nb, release_nb) -> list[str]:
    """What no restoring can fix, so a person must look: deleted or duplicated grade cells,
    unknown nbgrader cells, an answer cell turned into another type."""
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
        if _students_cell(original) and cell.cell_type != original.cell_type:
            problems.append(f"answer cell {gid} changed from {original.cell_type} to {cell.cell_type}")
    return problems


def restore_from_release(nb, release_nb) -> list[str]:
    """Put back what the student may not change, as nbgrader's OverwriteCells does: every grade
    cell's nbgrader metadata, and the whole of every non-answer grade cell (locked text, visible and
    hidden tests).  Answers stay the student's.  Returns what was restored, for a person to review.
    Call only when :func:`structure_problems` found nothing."""
    expected = {notebooks.grade_id(c): c for c in release_nb.cells if notebooks.grade_id(c)}
    restored = []
    for index, cell in enumerate(nb.cells):
        gid = notebooks.grade_id(cell)
        if gid not in expected:
            continue
        original = expected[gid]
        mine, theirs = cell.metadata.get("nbgrader", {}), original.metadata.get("nbgrader", {})
        changed = [key for key in ("grade", "solution", "locked", "points", "schema_version", "task")
                   if mine.get(key) != theirs.get(key)]
        if changed:
            restored.append(f"{gid}: nbgrader metadata {', '.join(changed)} was edited (restored from the release)")
        if _students_cell(original):  # code answers and written answers stay the student's
            cell.metadata["nbgrader"] = dict(theirs)
            continue
        if cell.cell_type != original.cell_type or cell.source != original.source:
            restored.append(f"{gid}: the locked cell was edited (restored from the release)")
        nb.cells[index] = copy.deepcopy(original)  # the feedback run executes it afresh
    return restored


def _students_cell(release_cell) -> bool:
    return notebooks.is_answer_cell(release_cell) or notebooks.is_written_answer(release_cell)


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
    """Every code cell the student could write: answer cells by grade id, extra cells by position."""
    code = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if notebooks.is_answer_cell(cell):
            code[notebooks.grade_id(cell)] = cell.source
        elif not cell.get("metadata", {}).get("nbgrader"):
            code[f"extra cell {index + 1}"] = cell.source
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

class Unreadable(Exception):
    def __init__(self, state: str, detail: str):
        super().__init__(detail)
        self.state = state


def read_submitted_notebook(course_root: Path, student: str, assignment: str = ASSIGNMENT,
                            notebook: str = NOTEBOOK) -> str:
    """The submitted notebook's text, opened as a regular file without following any link (a
    student's symlink never makes the grader read another file) and refused above the size limit."""
    submitted = course_root / "submitted"
    path = submitted / student / assignment / notebook
    for part in (submitted / student, submitted / student / assignment):
        if part.is_symlink():
            raise Unreadable(MALFORMED, f"{part.relative_to(course_root)} is a symbolic link")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Unreadable(MALFORMED, f"the notebook cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(MALFORMED, "the notebook is not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise Unreadable(TOO_LARGE, f"the notebook is {info.st_size / 2**20:.1f} MiB "
                                        f"(limit {MAX_NOTEBOOK_BYTES / 2**20:g} MiB)")
        data = handle.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable(MALFORMED, "the notebook is not UTF-8 text") from None


# ----------------------------------------------------------------------------- grading

def _is_memory_error(text: str | None) -> bool:
    return bool(text) and ("MemoryError" in text or "can't allocate memory" in text or "not enough memory" in text)


class _Session:
    """Runs the checks' cases through the sandbox and judges the observations here.

    A check's cases are sent together and the sandbox works on the next one while the previous is
    judged here (pipelined; the runner answers in order).  Every case a check lists is asked, so a
    check that fails on its first case leaves replies nobody judges: they are read and dropped before
    the next check, and if one of them never comes the sandbox is lost (:class:`_SandboxLost`), not
    the student's points: a fresh sandbox grades what is left.
    """

    def __init__(self, sandbox: Sandbox, limits: Limits, slow_calls: int = 0):
        self.sandbox, self.limits, self.memory_errors = sandbox, limits, 0
        self.slow_calls = slow_calls  # calls of this submission that took over half the limit, so far
        self._sent: collections.deque = collections.deque()  # (ticket, case, bytes, sent at), oldest first
        self._replies: dict[int, Observation] = {}
        self._in_flight = 0
        self._last_reply = 0.0
        self._tickets = itertools.count()

    def _submit(self, function: str, case: Case) -> int:
        request = encode_call_request(function, case.args, case.grad_wrt)
        size = len(request) + 8  # with the frame's length header
        while self._sent and self._in_flight + size > PIPELINE_BYTES:
            self._receive_one()
        self.sandbox.send_call(request)
        ticket = next(self._tickets)
        self._sent.append((ticket, case, size, time.monotonic()))
        self._in_flight += size
        return ticket

    def _receive_one(self) -> None:
        ticket, case, size, sent_at = self._sent.popleft()
        started = max(sent_at, self._last_reply)
        reply = self.sandbox.receive_call(started)
        self._last_reply = time.monotonic()
        if self._last_reply - started > self.sandbox.limits.call_seconds / 2:
            self.slow_calls += 1
            if self.slow_calls == SLOW_CALLS:
                self.sandbox.limits = shorter_limits(self.sandbox.limits)
        self._in_flight -= size
        try:
            self._replies[ticket] = from_wire(reply, case)
        except ValueError as exc:
            self.sandbox.kill()
            raise ProtocolViolation(f"unusable reply: {exc}", self.sandbox.log()) from None

    def _result(self, ticket: int) -> Observation:
        while ticket not in self._replies:
            self._receive_one()
        observation = self._replies.pop(ticket)
        if _is_memory_error(observation.error):
            self.memory_errors += 1
        return observation

    def observe(self, function: str, case: Case) -> Observation:
        return self._result(self._submit(function, case))

    def evaluate(self, check) -> str | None:
        def recall(case):
            """One case, or a list of cases (sent together) for a list of observations."""
            if isinstance(case, Case):
                return self.observe(check.function, case)
            return [self._result(ticket) for ticket in [self._submit(check.function, c) for c in case]]

        cases = list(check.cases())
        tickets = [self._submit(check.function, case) for case in cases]
        detail, error = None, None
        for case, ticket in zip(cases, tickets):
            observation = self._result(ticket)
            try:
                detail = judge_observation(check, case, observation, recall)
            except (SandboxTimeout, SandboxDied):
                raise
            except Exception as exc:  # a judge that cannot decide: a person must
                error = JudgeError(f"{type(exc).__name__}: {exc}")
                error.__cause__ = exc
                break
            if detail is not None:
                break
        try:
            while self._sent:  # cases this check asked and no longer needs
                self._receive_one()
        except (SandboxTimeout, SandboxDied) as exc:
            self.sandbox.kill()
            raise _SandboxLost(detail, error) from exc
        self._replies.clear()
        if error is not None:
            raise error
        return detail


class _SandboxLost(Exception):
    """A reply nobody needed never came (a case after the one that decided its check hung or crashed
    the process): the check is decided (``detail``), the sandbox is gone, a fresh one grades the rest."""

    def __init__(self, detail: str | None, error: "JudgeError | None" = None):
        super().__init__(detail)
        self.detail, self.error = detail, error


class JudgeError(Exception):
    """A check raised while judging an observation (a bug of ours, or a reply we failed to foresee)."""


def notebook_checks(checks_module, release_nb) -> dict:
    """The checks that decide this notebook's autograded cells, in the instructor module's order: one
    per code grade cell of the release, named by its grade id.  A cell without a check is a mistake in
    the course (``checks_module.CHECKS`` lacks it), never a reason to award or withhold its points."""
    cells = [notebooks.grade_id(cell) for cell in release_nb.cells
             if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("grade")]
    missing = [gid for gid in cells if gid not in checks_module.CHECKS]
    if missing:
        raise ValueError(f"{checks_module.__name__} has no check for the grade cell(s) {', '.join(missing)}")
    return {gid: check for gid, check in checks_module.CHECKS.items() if gid in cells}


def grade_submission(course_root: Path, student: str, checks_module, slot: int = 0,
                     limits: Limits = Limits(), assignment: str = ASSIGNMENT,
                     notebook: str = NOTEBOOK) -> SubmissionResult:
    """Grade one student's copy of one notebook of an assignment; never raises for anything the
    submission contains.  Nothing is written on the host: the sandbox's writable folders are its own tmpfs."""
    start = time.monotonic()
    points: dict[str, int] = {}
    try:
        release_nb = _release(course_root / "release" / assignment / notebook)
        checks = notebook_checks(checks_module, release_nb)
        points = {check.id: check.points for check in checks.values()}
        result = _grade(course_root, student, checks, release_nb, slot, limits, assignment, notebook)
    except Exception as exc:  # a bug of ours: make it visible, write zeros, keep the batch going
        result = _unscored(student, GRADER_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", points)
    result.assignment, result.notebook = assignment, notebook
    _in_language(result, editions.language_of(course_root, assignment))
    result.seconds = time.monotonic() - start
    return result


def _in_language(result: SubmissionResult, language: str) -> None:
    """The grader's own words in the messages of a language edition (the checks' messages already
    are; the details after them, computed values, stay as they are)."""
    if language == i18n.ENGLISH:
        return
    for cell in result.cells.values():
        for ours in (". What went wrong: ", ": not run, "):
            cell.message = cell.message.replace(ours, i18n.t(ours, language), 1)


def _release(path: Path):
    """The release notebook, read once per batch (per version of the file); never modified here."""
    info = path.stat()
    return _read_release(str(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=4)
def _read_release(path: str, mtime_ns: int, size: int):
    return notebooks.read(path)


def _grade(course_root, student, checks, release_nb, slot, limits, assignment, notebook) -> SubmissionResult:
    points = {check.id: check.points for check in checks.values()}
    try:
        text = read_submitted_notebook(course_root, student, assignment, notebook)
    except Unreadable as exc:
        return _unscored(student, exc.state, str(exc), points)
    try:
        invalid: dict = {}  # reads validates; one validation, not two
        nb = nbformat.reads(text, as_version=4, capture_validation_error=invalid)
        if invalid:
            raise invalid["ValidationError"]
    except Exception as exc:
        return _unscored(student, MALFORMED, f"the notebook cannot be read: {type(exc).__name__}: {exc}"[:500], points)
    if len(nb.cells) > MAX_CELLS:
        return _unscored(student, TOO_LARGE, f"the notebook has {len(nb.cells)} cells (limit {MAX_CELLS})", points)
    problems = structure_problems(nb, release_nb)
    if problems:
        return _unscored(student, MALFORMED, "; ".join(problems), points)
    restored = restore_from_release(nb, release_nb)  # nothing a student edited counts, nothing earned is lost

    answers = {notebooks.grade_id(c): c.source for c in nb.cells if notebooks.is_answer_cell(c)}
    setup_cell = notebooks.cells_by_grade_id(release_nb).get("setup")  # ours, not the student's copy
    setup = setup_cell.source if setup_cell is not None else ""
    result = SubmissionResult(student, GRADED, flags=restored + review_flags(student_code(nb)))
    result.written = {gid: {"answered": answered} for gid, answered in written_answers(nb, release_nb).items()}
    job = {"setup": setup, "answer_cells": answers, "notebook_name": notebook,
           "notebook_json": nbformat.writes(nb), "notebook_cap": limits.notebook_bytes,
           "reply_cap": limits.reply_bytes}
    _score_all(result, checks, job, slot, limits)
    if result.state == GRADED and result.score < result.max_score:
        result.state = FAILED_TESTS
    return result


def _score_all(result: SubmissionResult, checks: dict, job: dict, slot: int, limits: Limits) -> None:
    """The feedback run first (before any hidden input exists in the sandbox), then every check.
    A call that hangs or kills the sandbox costs the rest of that function's checks; a fresh
    sandbox grades the other functions.  Nothing runs past the submission's budget."""
    deadline = time.monotonic() + limits.submission_seconds
    pending = list(checks.values())
    broken: dict[str, str] = {}  # function -> why its remaining checks were not run
    memory_errors = 0
    feedback_pending = True
    slow_calls, call_limits = 0, limits  # call_limits: shorter once the calls keep running long
    while pending:
        sandbox = None
        try:
            clock = time.monotonic()
            sandbox = Sandbox(job, slot, call_limits, deadline).start()
            clock = result.timed("sandbox start (python, torch)", clock)
            if feedback_pending:
                feedback_pending = False
                _run_feedback(sandbox, result, limits)
                clock = result.timed("feedback run (notebook)", clock)
                if sandbox.process.poll() is not None or time.monotonic() >= deadline:
                    continue  # the feedback run ended the sandbox: a fresh one for the checks
            errors = sandbox.define()
            clock = result.timed("answer cells", clock)
        except (SandboxTimeout, SandboxDied) as exc:
            if sandbox is not None:
                sandbox.kill()
            if isinstance(exc, SandboxTimeout) and exc.budget == "submission":
                _out_of_budget(result, pending, limits)
                return
            # The answer cells themselves hang or kill the process: nothing can be called.
            state = _death_state(exc)
            why = f"the answer cells did not finish running ({state}: {exc})"
            _worse(result, state, why)
            for check in pending:
                result.cells[check.id] = CellResult(check.id, check.points, 0.0, f"{check.message}: not run, {why}")
            return
        memory_errors += sum(_is_memory_error(e) for e in errors.values())
        with sandbox:
            clock = time.monotonic()
            session = _Session(sandbox, limits, slow_calls)
            while pending:
                check = pending.pop(0)
                if check.function in broken:
                    result.cells[check.id] = CellResult(check.id, check.points, 0.0,
                                                        f"{check.message}: not run, {broken[check.function]}")
                    continue
                lost = False
                try:
                    detail = session.evaluate(check)
                except _SandboxLost as exc:
                    detail, lost = exc.detail, True
                    if exc.error is not None:
                        detail = f"the grader could not judge this answer ({exc.error}); an instructor will look at it"
                        _worse(result, GRADER_ERROR, f"{check.id} could not be judged: {exc.error}")
                except SandboxTimeout as exc:
                    if exc.budget == "submission":
                        pending.insert(0, check)
                        _out_of_budget(result, pending, limits)
                        return
                    detail = f"no answer within {sandbox.limits.call_seconds:g} s (an infinite loop?)"
                    session.slow_calls += 1
                    if session.slow_calls == SLOW_CALLS:
                        sandbox.limits = shorter_limits(sandbox.limits)
                    broken[check.function] = f"{check.function} timed out"
                    _worse(result, TIMED_OUT, f"{check.function} timed out in {check.id}")
                except ProtocolViolation as exc:
                    detail = f"the process running {check.function} sent a reply the grader refuses ({exc})"
                    broken[check.function] = f"{check.function} broke the grading protocol"
                    _worse(result, CRASHED, f"{check.function} broke the grading protocol in {check.id}: {exc}")
                    result.flags.append(f"{check.function}: forged or malformed reply from the sandbox ({exc})"[:300])
                except SandboxDied as exc:
                    detail = f"the process running {check.function} died ({exc})"
                    broken[check.function] = f"{check.function} crashed"
                    _worse(result, _death_state(exc), f"{check.function} killed its process in {check.id}: {exc.log[-300:]}")
                except JudgeError as exc:
                    detail = f"the grader could not judge this answer ({exc}); an instructor will look at it"
                    _worse(result, GRADER_ERROR, f"{check.id} could not be judged: {exc}")
                result.cells[check.id] = CellResult(
                    check.id, check.points, 0.0 if detail else float(check.points),
                    check.message if detail is None else f"{check.message}. What went wrong: {detail}")
                if check.function in broken or lost:
                    break  # this sandbox is gone: start a fresh one for what is left
            result.timed("test cases", clock)
            memory_errors += session.memory_errors
            if sandbox.limits.call_seconds < call_limits.call_seconds:
                result.flags.append(f"{session.slow_calls} calls took more than half the per-call limit: the "
                                    f"rest had {sandbox.limits.call_seconds:g} s each")
            slow_calls, call_limits = session.slow_calls, sandbox.limits
    if memory_errors:
        _worse(result, MEMORY_LIMIT, f"{memory_errors} call(s) ran out of memory "
                                     f"(limit {limits.memory_bytes / 2**30:g} GiB of address space)")


def _death_state(exc: Exception) -> str:
    if isinstance(exc, SandboxTimeout):
        return TIMED_OUT
    if getattr(exc, "out_of_memory", False) or _is_memory_error(getattr(exc, "log", "")):
        return MEMORY_LIMIT
    return CRASHED


def _out_of_budget(result: SubmissionResult, pending: list, limits: Limits) -> None:
    why = f"the submission's total time budget of {limits.submission_seconds:g} s ran out"
    _worse(result, TIMED_OUT, why)
    for check in pending:
        result.cells[check.id] = CellResult(check.id, check.points, 0.0, f"{check.message}: not run, {why}")


_SEVERITY = [GRADED, FAILED_TESTS, MEMORY_LIMIT, CRASHED, TIMED_OUT, TOO_LARGE, MALFORMED, GRADER_ERROR]


def _worse(result: SubmissionResult, state: str, detail: str) -> None:
    """Keep the most severe state; collect every reason."""
    if _SEVERITY.index(state) > _SEVERITY.index(result.state):
        result.state = state
    result.detail = f"{result.detail}; {detail}" if result.detail else detail


def _run_feedback(sandbox: Sandbox, result: SubmissionResult, limits: Limits) -> None:
    """Ask the runner to execute the student's notebook; a failure here costs no points."""
    try:
        data = sandbox.feedback()
        text = data.decode("utf-8")
        json.loads(text)  # shape and content are checked again where the page is rendered
        result.executed_notebook = text
    except SandboxTimeout as exc:
        sandbox.kill()
        _note(result, f"the feedback copy of the notebook could not be run to the end ({exc})")
    except SandboxDied as exc:
        sandbox.kill()
        _note(result, f"the feedback copy of the notebook could not be run to the end ({exc})")
    except (UnicodeDecodeError, ValueError):
        _note(result, "the feedback copy of the notebook came back unreadable")


def _note(result: SubmissionResult, text: str) -> None:
    result.detail = (result.detail + "; " if result.detail else "") + text


def _unscored(student: str, state: str, detail: str, points: dict[str, int]) -> SubmissionResult:
    result = SubmissionResult(student, state, detail=detail)
    result.cells = {gid: CellResult(gid, p, 0.0, f"not graded: {state}") for gid, p in points.items()}
    return result
