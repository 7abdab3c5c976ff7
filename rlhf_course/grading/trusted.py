"""Trusted grading of one submission: scores are decided here, outside the student's process.

The submission is taken in first (:mod:`intake`: read safely, structure checked, locked cells restored);
its answer cells run only in the sandbox (:mod:`sandbox_runner`), which returns plain observations;
the assignment's checks judge them in this process.  Nothing the student's code does (patched
comparison functions, IPython input transformers, custom exception handlers) can reach the judging.
"""
from __future__ import annotations

import collections
import functools
import itertools
import json
import time
import traceback

import nbformat

from rlhf_course.course import notebooks
from rlhf_course.grading.assignment import Assignment
from rlhf_course.grading.checks import Finding, judge_observation, public_text
from rlhf_course.grading.intake import Unreadable, take_in, written_answers
from rlhf_course.course.limits import Limits, shorter_calls
from rlhf_course.grading.misconceptions import name_misconceptions
from rlhf_course.grading.sandbox.observe import Case, Observation, from_wire
from rlhf_course.grading.sandbox.protocol import PIPELINE_BYTES
from rlhf_course.grading.results import (CRASHED, FAILED_TESTS, GRADED, GRADER_ERROR, MEMORY_LIMIT, TIMED_OUT,
                                         CellResult, SubmissionResult, failed_message, not_run_message, note,
                                         unscored, worse)
from rlhf_course.grading.sandbox.sandbox import ProtocolViolation, Sandbox, SandboxDied, SandboxTimeout, encode_call_request
from rlhf_course.course.settings import Course
from rlhf_course.i18n import speaking, t


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
            if self.slow_calls == self.limits.slow_calls:
                self.sandbox.limits = shorter_calls(self.sandbox.limits)
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


COULD_NOT_JUDGE = "the grader could not judge this answer ({error}); an instructor will look at it"
COULD_NOT_JUDGE_SHOWN = "the grader could not judge this answer; an instructor will look at it"


def _could_not_judge(error: Exception, language: str) -> Finding:
    return Finding(t(COULD_NOT_JUDGE, language, error=error), t(COULD_NOT_JUDGE_SHOWN, language))


class JudgeError(Exception):
    """A check raised while judging an observation (a bug of ours, or a reply we failed to foresee)."""


def grade_submission(course: Course, assignment: Assignment, student: str, notebook: str, slot: int = 0,
                     limits: Limits = Limits(), sandbox: type = Sandbox) -> SubmissionResult:
    """Grade one student's copy of one notebook of an assignment; never raises for anything the
    submission contains.  Nothing is written on the host: the sandbox's writable folders are its own tmpfs.
    ``sandbox``: the class that runs the student's code (:class:`Sandbox`; tests pass a double).
    What each cell is worth is the release notebook's ``nbgrader.points`` (nbgrader's own truth, the
    gradebook's max score); the checks decide only pass or fail."""
    start = time.monotonic()
    points: dict[str, float] = {}
    try:
        release_nb = assignment.release_notebook(notebook)
        checks = assignment.notebook_checks(release_nb)
        points = notebooks.points_of(release_nb, checks)
        start_sandbox = functools.partial(sandbox, cache_directory=course.cache_directory)
        result = _grade(course, assignment, student, notebook, checks, points, release_nb, slot, limits, start_sandbox)
    except Exception as exc:  # a bug of ours: make it visible, write zeros, keep the batch going
        result = unscored(student, GRADER_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", points,
                          assignment.language)
    result.assignment, result.notebook, result.language = assignment.name, notebook, assignment.language
    _name_misconceptions(course, assignment, result)
    result.seconds = time.monotonic() - start
    return result


def _name_misconceptions(course: Course, assignment: Assignment, result: SubmissionResult) -> None:
    """The catalogued misconceptions the lost cells name (:mod:`misconceptions`), unless the course turned
    naming off.  A failure here is ours: the scores stand, a person is told."""
    try:
        if course.grading.name_misconceptions:
            result.misconceptions = name_misconceptions(result, course, assignment.base, assignment.checks)
    except Exception as exc:
        result.flags.append(f"misconceptions not named: {type(exc).__name__}: {exc}"[:300])


def _grade(course, assignment, student, notebook, checks, points, release_nb, slot, limits, sandbox) -> SubmissionResult:
    try:
        nb, flags = take_in(course.folder("submitted", student, assignment.name), notebook, release_nb, limits)
    except Unreadable as exc:
        # Intake's own sentence about the notebook's structure, made before any call: the student may read it.
        return unscored(student, exc.state, str(exc), points, assignment.language, student_detail=str(exc))
    answers = {notebooks.grade_id(c): c.source for c in nb.cells if notebooks.is_answer_cell(c)}
    setup_cell = notebooks.cells_by_grade_id(release_nb).get("setup")  # ours, not the student's copy
    setup = setup_cell.source if setup_cell is not None else ""
    result = SubmissionResult(student, GRADED, language=assignment.language, flags=flags)
    result.canonical_notebook = nbformat.writes(nb)
    result.written = {gid: {"answered": answered} for gid, answered in written_answers(nb, release_nb).items()}
    job = {"setup": setup, "answer_cells": answers, "notebook_name": notebook,
           "notebook_json": result.canonical_notebook, "notebook_cap": limits.notebook_bytes,
           "reply_cap": limits.reply_bytes}
    with speaking(assignment.language):  # the checks' own sentences, in the student's language
        _score_all(result, checks, points, job, slot, limits, sandbox)
    if result.state == GRADED and result.score < result.max_score:
        result.state = FAILED_TESTS
    return result


def _score_all(result: SubmissionResult, checks: dict, points: dict[str, float], job: dict, slot: int, limits: Limits,
               sandbox_class) -> None:
    """The feedback run first (before any hidden input exists in the sandbox), then every check, each
    worth its cell's ``points``.  ``sandbox_class(job, slot, limits, deadline)`` starts a sandbox.
    A call that hangs or kills the sandbox costs the rest of that function's checks; a fresh
    sandbox grades the other functions.  Nothing runs past the submission's budget."""
    deadline = time.monotonic() + limits.submission_seconds
    pending = list(checks.values())
    broken: dict[str, str] = {}  # function -> why its remaining checks were not run
    memory_errors = 0
    feedback_pending = True
    # Once a hidden input has entered a sandbox, nothing the student's process says reaches the student whole.
    hidden_sent = False
    slow_calls, call_limits = 0, limits  # call_limits: shorter once the calls keep running long
    while pending:
        sandbox = None
        try:
            clock = time.monotonic()
            sandbox = sandbox_class(job, slot, call_limits, deadline).start()
            clock = result.timed("sandbox start (zygote fork)", clock)
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
                _out_of_budget(result, pending, points, limits)
                return
            # The answer cells themselves hang or kill the process: nothing can be called.
            state = _death_state(exc)
            why = t("the answer cells did not finish running ({state}: {error})", result.language,
                    state=t(state, result.language), error=exc)
            shown = t("the answer cells did not finish running ({state})", result.language,
                      state=t(state, result.language))
            worse(result, state, why, shown)
            for check in pending:
                result.cells[check.id] = CellResult(check.id, points[check.id], 0.0,
                                                    not_run_message(check.message, shown, result.language),
                                                    not_run_message(check.message, why, result.language),
                                                    judged=False)
            return
        memory_errors += sum(_is_memory_error(e) for e in errors.values())
        with sandbox:
            clock = time.monotonic()
            session = _Session(sandbox, limits, slow_calls)
            while pending:
                check = pending.pop(0)
                hidden_sent = hidden_sent or not check.visible
                if check.function in broken:
                    result.cells[check.id] = CellResult(check.id, points[check.id], 0.0, not_run_message(
                        check.message, broken[check.function], result.language), judged=False)
                    continue
                lost, judged, memory_errors_before = False, True, session.memory_errors
                try:
                    detail = session.evaluate(check)
                except _SandboxLost as exc:
                    detail, lost = exc.detail, True
                    if exc.error is not None:
                        detail = _could_not_judge(exc.error, result.language)
                        worse(result, GRADER_ERROR, f"{check.id} could not be judged: {exc.error}",
                              t(COULD_NOT_JUDGE_SHOWN, result.language))
                        judged = False
                except SandboxTimeout as exc:
                    if exc.budget == "submission":
                        pending.insert(0, check)
                        _out_of_budget(result, pending, points, limits)
                        return
                    detail = Finding(t("no answer within {seconds:g} s (an infinite loop?)", result.language,
                                       seconds=sandbox.limits.call_seconds))
                    session.slow_calls += 1
                    if session.slow_calls == limits.slow_calls:
                        sandbox.limits = shorter_calls(sandbox.limits)
                    broken[check.function] = t("{function} timed out", result.language, function=check.function)
                    judged = False  # hung, or only slow on this machine: a person tells
                    worse(result, TIMED_OUT, f"{check.function} timed out in {check.id}", broken[check.function])
                except ProtocolViolation as exc:
                    detail = Finding(t("the process running {function} sent a reply the grader refuses ({error})",
                                       result.language, function=check.function, error=exc),
                                     t("the process running {function} sent a reply the grader refuses",
                                       result.language, function=check.function))
                    broken[check.function] = t("{function} broke the grading protocol", result.language,
                                               function=check.function)
                    judged = False
                    worse(result, CRASHED, f"{check.function} broke the grading protocol in {check.id}: {exc}",
                          broken[check.function])
                    result.flags.append(f"{check.function}: forged or malformed reply from the sandbox ({exc})"[:300])
                except SandboxDied as exc:
                    detail = Finding(t("the process running {function} died ({error})", result.language,
                                       function=check.function, error=exc),
                                     t("the process running {function} died", result.language,
                                       function=check.function))
                    broken[check.function] = t("{function} crashed", result.language, function=check.function)
                    judged = False
                    worse(result, _death_state(exc), f"{check.function} killed its process in {check.id}: {exc.log[-300:]}",
                          broken[check.function])
                except JudgeError as exc:
                    detail = _could_not_judge(exc, result.language)
                    worse(result, GRADER_ERROR, f"{check.id} could not be judged: {exc}",
                          t(COULD_NOT_JUDGE_SHOWN, result.language))
                    judged = False
                result.cells[check.id] = _cell_result(check, points[check.id], detail, hidden_sent, result.language)
                # a call out of memory may be the limit's doing, not the answer's: a person tells
                result.cells[check.id].judged = judged and session.memory_errors == memory_errors_before
                if check.function in broken or lost:
                    break  # this sandbox is gone: start a fresh one for what is left
            result.timed("test cases", clock)
            memory_errors += session.memory_errors
            if sandbox.limits.call_seconds < call_limits.call_seconds:
                result.flags.append(f"{session.slow_calls} calls took more than half the per-call limit: the "
                                    f"rest had {sandbox.limits.call_seconds:g} s each")
            slow_calls, call_limits = session.slow_calls, sandbox.limits
    if memory_errors:
        why = t("{count} call(s) ran out of memory (limit {limit:g} GiB of address space)", result.language,
                count=memory_errors, limit=limits.memory_bytes / 2**30)
        worse(result, MEMORY_LIMIT, why, why)


def _cell_result(check, points: float, detail: str | None, hidden_sent: bool, language: str) -> CellResult:
    """One test cell's score and lines: the student's line is the check's message and the detail's public part
    (the whole detail only for a visible test judged before any hidden input entered the sandbox, whose inputs
    the student already has); the instructor's is the whole detail."""
    if detail is None:
        return CellResult(check.id, points, float(points), check.message)
    shown = detail if check.visible and not hidden_sent else public_text(detail)
    return CellResult(check.id, points, 0.0, failed_message(check.message, shown, language),
                      failed_message(check.message, detail, language))


def _death_state(exc: Exception) -> str:
    if isinstance(exc, SandboxTimeout):
        return TIMED_OUT
    if getattr(exc, "out_of_memory", False) or _is_memory_error(getattr(exc, "log", "")):
        return MEMORY_LIMIT
    return CRASHED


def _out_of_budget(result: SubmissionResult, pending: list, points: dict[str, float], limits: Limits) -> None:
    why = t("the submission's total time budget of {seconds:g} s ran out", result.language,
            seconds=limits.submission_seconds)
    worse(result, TIMED_OUT, why, why)
    for check in pending:
        result.cells[check.id] = CellResult(check.id, points[check.id], 0.0,
                                            not_run_message(check.message, why, result.language), judged=False)


def _run_feedback(sandbox: Sandbox, result: SubmissionResult, limits: Limits) -> None:
    """Ask the runner to execute the student's notebook; a failure here costs no points."""
    try:
        data = sandbox.feedback()
        text = data.decode("utf-8")
        json.loads(text)  # shape and content are checked again where the page is rendered
        result.executed_notebook = text
    except (SandboxTimeout, SandboxDied) as exc:
        sandbox.kill()
        why = t("the feedback copy of the notebook could not be run to the end ({error})", result.language, error=exc)
        note(result, why, why)  # the student's own notebook, run before any hidden input existed
    except (UnicodeDecodeError, ValueError, RecursionError):
        why = t("the feedback copy of the notebook came back unreadable", result.language)
        note(result, why, why)
