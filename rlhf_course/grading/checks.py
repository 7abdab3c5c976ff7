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

Nothing here knows the assignment's answers: it holds no reference implementation and no case.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from rlhf_course import i18n
from rlhf_course.grading.observe import Case, Observation, observe
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


def by_id(checks: Iterable[Check]) -> dict[str, Check]:
    """The checks keyed by grade id; two with one id are a mistake in the instructor module."""
    table: dict[str, Check] = {}
    for check in checks:
        if check.id in table:
            raise ValueError(f"two checks have the id {check.id!r}")
        table[check.id] = check
    return table


def judge_observation(check: Check, case: Case, observation: Observation, recall: Recall) -> str | None:
    """Decide one case from what the call produced; only trusted code runs here."""
    if observation.error is not None:
        return observation.error
    if type(observation.value) is not torch.Tensor:
        return t("must return a torch.Tensor, got {type}", type=observation.value_type)
    detail = check.judge(case, observation, recall)
    if detail is not None and case.note:
        detail = t("{detail} ({note})", detail=detail, note=case.note)
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
    f-string: the edition check finds every ``say("...")`` and requires its translation."""
    def say(english: str, **fields) -> str:
        text = edition_table(checks_file, i18n.in_effect()).get("details", {}).get(english) or english
        return text.format(**fields) if fields else text
    return say


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
    if tuple(got.shape) != tuple(expected.shape):
        return t("{what} has shape {shape}, expected {expected}", what=t(what), shape=tuple(got.shape),
                 expected=tuple(expected.shape))
    if not got.dtype.is_floating_point:
        return t("{what} has dtype {dtype}, expected a floating-point tensor", what=t(what), dtype=got.dtype)
    got64 = got.to(torch.float64)
    if not torch.isfinite(got64).all():
        return t("{what} is not finite: {values}", what=t(what), values=short(got64))
    bad = (got64 - expected).abs() > atol + rtol * expected.abs()
    if bad.any():
        return t("{what} {values}, expected {expected}", what=t(what), values=short(got64), expected=short(expected))
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
        return t("the input `{name}` was changed in place", name=changed)
    # A function that ignores its inputs leaves them alone too: that earns nothing here.
    moved = recall(Case((case.args[0] * 0.5 + 0.25,) + tuple(case.args[1:])))
    if type(moved.value) is torch.Tensor and torch.equal(moved.value, observation.value):
        return t("the result does not depend on `{name}`", name=names[0])
    return None


def unmodified_only(case: Case, obs: Observation, names: tuple[str, ...]) -> str | None:
    """None when no input was changed in place (a visible test's calls must see the inputs it built)."""
    changed = changed_input(case, obs, names)
    return changed and t("the input `{name}` was changed in place, so the cell's next call sees other inputs",
                         name=changed)


def gradients(case: Case, observation: Observation, expected: dict[int, torch.Tensor],
              names: tuple[str, ...]) -> str | None:
    """None when backward() worked and each argument index in ``expected`` got that gradient."""
    if observation.grad_error is not None:
        return t("backward() failed: {error}", error=observation.grad_error)
    for index, want in expected.items():
        got = observation.grads.get(index)
        if got is None:
            return t("no gradient reached `{name}` (is the graph detached?)", name=names[index])
        detail = compare(got, want, rtol=1e-4, atol=1e-6, what=f"d/d{names[index]}")
        if detail is not None:
            return detail
    return None
