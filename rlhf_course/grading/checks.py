"""The harness every assignment's hidden checks are written with.

An assignment's instructor module (``instructor/<name>.py``, never released) holds only what is
particular to it: its cases, its reference implementations and a list of :class:`Check`. Everything
that runs them lives here, so the trusted grader (:mod:`rlhf_course.grading.trusted`) depends on this
module and on the instructor module's ``CHECKS`` only, never on its helpers:

* :func:`evaluate` / :func:`run` call the student's function in this process (the notebook kernel's
  hidden test cells, the instructors' in-process tests);
* :func:`judge_observation` decides one case from an :class:`Observation`, wherever the call was
  made (the trusted grader makes it in a sandbox and judges here);
* comparison helpers give the short, specific messages students read in their feedback.

What a judge finds is a :class:`Finding`: the whole text for the instructor, and ``public``, the line a student
may read once hidden inputs are involved.  ``public`` is composed here from a closed vocabulary chosen by the
grader (a category such as "wrong value on this case", the judge's own words, the case's note) and carries
nothing the student's process said or returned and nothing the reference computed: no number, shape or dtype of
the student's value, no expected value (docs/grading.md, the threat model).  The fields of a judge's sentence
are the instructor's only (:func:`phrasebook`).  A plain string a judge returns is never shown to a student: its
public line is "wrong value".

Nothing here knows the assignment's answers: it holds no reference implementation and no case.
"""
from __future__ import annotations

import builtins
import contextlib
import contextvars
import functools
import json
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from rlhf_course import i18n
from rlhf_course.grading.sandbox.observe import Case, Observation, observe
from rlhf_course.i18n import t

Recall = Callable
"""Calls the student's function again (self-consistency checks use it): ``recall(case)`` gives an
:class:`Observation`, ``recall([case, ...])`` a list of them (the trusted grader sends such a list to
its sandbox at once)."""


@dataclass(frozen=True)
class Check:
    """One hidden test: ``id`` is the grade cell's grade_id, ``function`` the student's function it
    calls, ``message`` the property in one line (students see it), ``cases()`` the inputs and
    ``judge(case, observation, recall)`` None (pass) or what was wrong.  What the cell is worth is the
    notebook's (its ``nbgrader.points``, as for any nbgrader cell), never the check's."""

    id: str
    function: str
    message: str
    cases: Callable[[], list[Case]]
    judge: Callable[[Case, Observation, Recall], str | None]
    visible: bool = False  # the notebook's visible test cell, re-decided outside the kernel


class CheckFailed(AssertionError):
    pass


class Finding(str):
    """What a judge found wrong: the string itself is the whole text (the instructor's: gradebook, Formgrader,
    grading report); ``public`` is what a student may read of it (module docstring).  Any string operation on a
    Finding gives a plain string, which the student never reads: only these helpers make public lines."""

    public: str

    def __new__(cls, text: str, public: str | None = None) -> "Finding":
        finding = super().__new__(cls, text)
        finding.public = str(text) if public is None else str(public)
        return finding


def public_note(note: str) -> str:
    """What a student reads of a case's note: a :class:`Finding`'s public part, else the note as written."""
    return note.public if isinstance(note, Finding) else str(note)


def public_text(detail: str) -> str:
    """The line a student reads for a failed check's ``detail``: its public part, or only "wrong value"."""
    return detail.public if isinstance(detail, Finding) else t("wrong value")


WITHHELD = "…"  # where a judge's sentence had a field, in the line a student reads

# True while a judge runs: what it composes may hold the student's returned value or the reference's answer.
_judging = contextvars.ContextVar("judging", default=False)


@contextlib.contextmanager
def _while_judging():
    token = _judging.set(True)
    try:
        yield
    finally:
        _judging.reset(token)


class _Withheld:
    """A field of a sentence a judge composed, as a student reads it: whatever its format spec, never its value."""

    def __format__(self, spec: str) -> str:
        return WITHHELD


def _public_field(value):
    """One field of a sentence as a student may read it (:func:`phrasebook`).  In a judge's sentence only the
    grader's own words (a nested :class:`Finding`'s public part) are shown; in a case's note, written before any
    call, the grader's settings (numbers, small tuples of numbers, dtypes) too; anything else is withheld."""
    if isinstance(value, Finding):
        return value.public
    if _judging.get():
        return _Withheld()
    if value is None or isinstance(value, (bool, int, float, torch.dtype)):
        return value
    if isinstance(value, tuple) and all(type(n) is int for n in value):
        return tuple(value)  # a torch.Size prints as a plain shape
    return _Withheld()


# What a student may read of an exception: its class, when it is one of Python's own (a name the student
# chose could carry anything).
BUILTIN_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                               if isinstance(value, type) and issubclass(value, BaseException))
# What a student may read of a returned value that is not a tensor: its type, from this list.
PLAIN_KINDS = frozenset({"float", "int", "bool", "complex", "NoneType", "tuple", "list", "dict", "str", "ndarray",
                         "Parameter", "generator", "function"})


def raised_line(error_type: str | None) -> str:
    """The public line for a call that raised (NotImplementedError: :func:`not_written_line`): the exception's class
    if it is Python's own."""
    if error_type == "NameError":
        return t("raised NameError: is the function defined, and did its answer cell run without an error?")
    if error_type in BUILTIN_EXCEPTIONS:
        return t("raised {error}", error=error_type)
    return t("raised an exception of a class of its own")


def not_written_line(function: str) -> str:
    """The whole line for a call that raised NotImplementedError: the released stub's, which says nothing itself."""
    return t("raised NotImplementedError: {function} is not written yet: replace `raise NotImplementedError()` in "
             "its answer cell with your code, run that cell and the visible test under it, then submit again",
             function=function)


def returned_line(value_type: str) -> str:
    """The public line for a call that returned something other than a plain tensor."""
    if value_type.startswith("unusable tensor"):
        kind = t("a tensor the grader cannot use (not a plain CPU tensor of a real dtype, or too large)")
    elif value_type in PLAIN_KINDS:
        kind = value_type
    else:
        kind = t("a value of another type")
    return t("must return a torch.Tensor, got {type}", type=kind)


def by_id(checks: Iterable[Check]) -> dict[str, Check]:
    """The checks keyed by grade id; two with one id are a mistake in the instructor module."""
    table: dict[str, Check] = {}
    for check in checks:
        if check.id in table:
            raise ValueError(f"two checks have the id {check.id!r}")
        table[check.id] = check
    return table


def judge_observation(check: Check, case: Case, observation: Observation, recall: Recall) -> str | None:
    """Decide one case from what the call produced; only trusted code runs here.  None when it passes, else a
    :class:`Finding` (its public line: a category or the judge's own words, and the case's note)."""
    if observation.error is not None and observation.error_type == "NotImplementedError":
        detail = Finding(not_written_line(check.function))
    elif observation.error is not None:
        detail = Finding(t("raised {error}", error=observation.error), raised_line(observation.error_type))
    elif type(observation.value) is not torch.Tensor:
        detail = Finding(t("must return a torch.Tensor, got {type}", type=observation.value_type),
                         returned_line(observation.value_type))
    else:
        with _while_judging():
            detail = check.judge(case, observation, recall)
    if detail is not None and case.note:
        # The note is the grader's own description of the case, written before any call; a student reads its
        # public part (the regime a case tests, never its tensors' values: tests/grading/test_case_notes.py).
        detail = Finding(t("{detail} ({note})", detail=detail, note=case.note),
                         t("{detail} ({note})", detail=public_text(detail), note=public_note(case.note)))
    return detail


def evaluate(check: Check, function: Callable) -> str | None:
    """Run every case of ``check`` on ``function`` in this process; None when all pass, else what
    went wrong first."""
    def recall(case):
        return observe(function, case) if isinstance(case, Case) else [observe(function, c) for c in case]

    for case in check.cases():
        detail = judge_observation(check, case, recall(case), recall)
        if detail is not None:
            return detail
    return None


def run(check: Check, function: Callable, messages: dict[str, str] | None = None) -> None:
    """What a hidden test cell does: raise :class:`CheckFailed` naming the property when it fails.
    ``messages``: the checks' messages in the notebook's language, by check id (English if absent)."""
    message = (messages or {}).get(check.id, check.message)
    detail = evaluate(check, function)
    if detail is not None:
        raise CheckFailed(f"{message}{t('. What went wrong: ')}{detail}")
    print(t("passed: {message}", message=message))


def translated_messages(checks_file: str) -> dict[str, str]:
    """The messages of the checks in ``instructor/<base>_hidden_checks.py`` in the kernel's language
    (:func:`rlhf_course.i18n.set_language`), from the course's ``i18n/<base>.<language>.json``; {} in
    English or when the course has no such file."""
    table = edition_table(checks_file, i18n.language())
    return {cid: entry["text"] for cid, entry in table.get("messages", {}).items()}


def edition_table(checks_file: str, language: str) -> dict:
    """The translation file of the assignment whose checks are ``checks_file``
    (``instructor/<base>_hidden_checks.py`` -> ``i18n/<base>.<language>.json`` beside it); {} in
    English or when the course has none."""
    from pathlib import Path

    if language == i18n.ENGLISH:
        return {}
    path = Path(checks_file).resolve()
    table_path = path.parent.parent / "i18n" / f"{path.stem.removesuffix('_hidden_checks')}.{language}.json"
    try:
        stamp = table_path.stat().st_mtime_ns
    except FileNotFoundError:
        return {}
    return _read_table(table_path, stamp)


@functools.lru_cache(maxsize=16)
def _read_table(path, stamp: int) -> dict:  # stamp: a file edited since is read again
    return json.loads(path.read_text(encoding="utf-8"))


def phrasebook(checks_file: str) -> Callable[..., str]:
    """``say(english, **fields)`` for an instructor checks module (``say = phrasebook(__file__)``):
    one of its own sentences (a judge's detail, a case's note) in the language in effect (the grader
    thread's, else the kernel's), from the ``"details"`` of its translation file, the English template
    as the key; the English when there is no translation.  Pass a template and its fields, never an
    f-string: the edition check finds every ``say("...")`` and requires its translation.  The instructor reads
    every field; a student reads a note's settings, but none of the fields of a sentence a judge composes (they
    may be what the student's function returned, or the answer): ``k3 is negative (…)``."""
    def say(english: str, **fields) -> Finding:
        text = edition_table(checks_file, i18n.in_effect()).get("details", {}).get(english) or english
        if not fields:
            return Finding(text)
        public = text.format(**{name: _public_field(value) for name, value in fields.items()})
        return Finding(text.format(**{name: _full_field(value) for name, value in fields.items()}), public)
    return say


def _full_field(value):
    return short(value) if isinstance(value, torch.Tensor) else value


# ----------------------------------------------------------------------------- comparison helpers

def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def uniform(gen: torch.Generator, low: float, high: float, *shape: int) -> torch.Tensor:
    """float64 samples uniform in [low, high), of the given shape."""
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=torch.float64)


def short(tensor: torch.Tensor) -> str:
    """At most six values of a tensor, for a message."""
    flat = tensor.detach().reshape(-1)
    text = ", ".join(f"{v:.6g}" for v in flat[:6].tolist())
    if flat.numel() > 6:
        text += ", ..."
    return f"[{text}]" if tensor.dim() > 0 else text


def compare(got: torch.Tensor, expected: torch.Tensor, *, rtol: float, atol: float,
            what: str = "value") -> str | None:
    """None when ``got`` has ``expected``'s shape, a floating dtype, finite values and
    |got - expected| <= atol + rtol * |expected| everywhere (in float64); else what differs."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    name, public_name = t(what), (what.public if isinstance(what, Finding) else t(what))
    if tuple(got.shape) != tuple(expected.shape):
        return Finding(t("{what} has shape {shape}, expected {expected}", what=name, shape=tuple(got.shape),
                         expected=tuple(expected.shape)),
                       t("{what}: wrong shape on this case", what=public_name))
    if not got.dtype.is_floating_point:
        return Finding(t("{what} has dtype {dtype}, expected a floating-point tensor", what=name, dtype=got.dtype),
                       t("{what}: not a floating-point tensor", what=public_name))
    got64 = got.to(torch.float64)
    if not torch.isfinite(got64).all():
        return Finding(t("{what} is not finite: {values}", what=name, values=short(got64)),
                       t("{what} is not finite", what=public_name))
    if ((got64 - expected).abs() > atol + rtol * expected.abs()).any():
        return Finding(t("{what} {values}, expected {expected}", what=name, values=short(got64),
                         expected=short(expected)),
                       t("{what}: wrong value on this case", what=public_name))
    return None


def changed_input(case: Case, obs: Observation, names: tuple[str, ...]) -> str | None:
    """The name of the first tensor argument the call changed in place, if any."""
    for name, before, after in zip(names, case.args, obs.args_after):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            return name
    return None


def unmodified(case: Case, observation: Observation, names: tuple[str, ...], recall: Recall) -> str | None:
    """None when no input was changed in place and the result depends on the first argument."""
    changed = changed_input(case, observation, names)
    if changed:
        return Finding(t("the input `{name}` was changed in place", name=changed))
    # A function that ignores its inputs leaves them alone too: that earns nothing here.
    moved = recall(Case((case.args[0] * 0.5 + 0.25,) + tuple(case.args[1:])))
    if type(moved.value) is torch.Tensor and torch.equal(moved.value, observation.value):
        return Finding(t("the result does not depend on `{name}`", name=names[0]))
    return None


def unmodified_only(case: Case, obs: Observation, names: tuple[str, ...]) -> str | None:
    """None when no input was changed in place (a visible test's calls must see the inputs it built)."""
    changed = changed_input(case, obs, names)
    return changed and Finding(t("the input `{name}` was changed in place, so the cell's next call sees other "
                                 "inputs", name=changed))


def gradients(case: Case, observation: Observation, expected: dict[int, torch.Tensor],
              names: tuple[str, ...]) -> str | None:
    """None when backward() worked and each argument index in ``expected`` got that gradient."""
    if observation.grad_error is not None:
        return Finding(t("backward() failed: {error}", error=observation.grad_error), t("backward() failed"))
    for index, want in expected.items():
        got = observation.grads.get(index)
        if got is None:
            return Finding(t("no gradient reached `{name}` (is the graph detached?)", name=names[index]))
        detail = compare(got, want, rtol=1e-4, atol=1e-6, what=f"d/d{names[index]}")
        if detail is not None:
            return detail
    return None
