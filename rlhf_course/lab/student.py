"""The student's three functions, wrapped so that a bug stops the lab with one clear sentence."""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Callable

import torch

from rlhf_course.course.errors import CourseError
from rlhf_course.i18n import t


class StudentFunctionError(CourseError, RuntimeError):
    """Raised when a student's function fails; the message names the function and the problem."""


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return t(" (at {file}, line {line}: {code})", file=last.filename, line=last.lineno, code=last.line)


def guard(function: Callable, name: str, expected_shape: Callable[..., tuple], needs_grad: bool):
    def guarded(*args, **kwargs):
        try:
            result = function(*args, **kwargs)
        except NotImplementedError:
            raise StudentFunctionError(t("{name} is not implemented yet: complete it in the notebook first", name=name)) from None
        except Exception as exc:
            raise StudentFunctionError(t("{name} raised {error}", name=name, error=f"{type(exc).__name__}: {exc}{_where(exc)}")) from None
        if type(result) is not torch.Tensor:
            raise StudentFunctionError(t("{name} must return a torch.Tensor, got {got}", name=name, got=type(result).__name__))
        want = expected_shape(*args, **kwargs)
        if tuple(result.shape) != want:
            raise StudentFunctionError(t("{name} returned shape {shape}, expected {expected}", name=name,
                                         shape=tuple(result.shape), expected=want))
        if not torch.isfinite(result).all():
            raise StudentFunctionError(t("{name} returned NaN or infinite values: {values}", name=name,
                                         values=result.detach().flatten()[:5].tolist()))
        if needs_grad and torch.is_grad_enabled() and not result.requires_grad:
            raise StudentFunctionError(t("{name} returned a tensor with no gradient: use torch operations on its inputs",
                                         name=name))
        return result

    guarded.__name__ = name
    return guarded


@dataclass(frozen=True)
class StudentFunctions:
    """The three functions the lab trains with, each checked on every call."""

    ppo_clipped_objective: Callable
    dpo_loss: Callable
    compute_gae: Callable

    @classmethod
    def wrap(cls, ppo_clipped_objective: Callable, dpo_loss: Callable, compute_gae: Callable):
        return cls(
            guard(ppo_clipped_objective, "ppo_clipped_objective", lambda *a, **k: (), needs_grad=True),
            guard(dpo_loss, "dpo_loss", lambda log_p_w, *a, **k: tuple(log_p_w.shape), needs_grad=True),
            guard(compute_gae, "compute_gae", lambda rewards, *a, **k: tuple(rewards.shape), needs_grad=False),
        )


# The notebook's visible examples and their expected outputs (what the student's copy prints); the
# example's name is English, translated by t() when a warning names it.
_VISIBLE = {
    "ppo_clipped_objective": (lambda: ((torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0]), torch.ones(5), 0.2),),
                              [1.02], "A = +1 on ratios [0.5, 1, 1.5, 2, 3]"),
    "dpo_loss": (lambda: ((torch.tensor(-2.0), torch.tensor(-5.0), torch.tensor(-3.0), torch.tensor(-3.0), 0.1),),
                 [0.5544], "the visible pair"),
    "compute_gae": (lambda: ((torch.tensor([0.0, 0.0, 0.0, 0.0, 10.0]), torch.ones(5), 0.0, 0.99, 0.95),),
                    [7.0051, 7.4589, 7.9415, 8.4545, 9.0], "the guide's 5-step episode"),
}


def _lab_shaped_inputs(name: str) -> tuple:
    """One call shaped as training makes it: (B, T) ratios with (B, 1) advantages, (B,) log-probs
    that need gradients, one episode of T steps."""
    generator = torch.Generator().manual_seed(0)
    if name == "ppo_clipped_objective":
        return (torch.rand(4, 10, generator=generator).add(0.5).requires_grad_(), torch.randn(4, 1, generator=generator), 0.2)
    if name == "dpo_loss":
        return (torch.randn(4, generator=generator).requires_grad_(), torch.randn(4, generator=generator).requires_grad_(),
                torch.randn(4, generator=generator), torch.randn(4, generator=generator), 0.1)
    return (torch.randn(10, generator=generator), torch.randn(10, generator=generator), 0.0, 1.0, 0.95)


def check_before_training(functions: StudentFunctions) -> list[str]:
    """Call each function once before any training (seconds, not minutes).

    Raises StudentFunctionError naming EVERY function that cannot run (not implemented, raises,
    wrong shape, NaN, no gradient, not a tensor).  Returns one warning per function that runs
    but does not reproduce its visible test's expected output: the lab can train with it, but
    its curves will not show what they should."""
    problems, warnings = [], []
    for name in ("ppo_clipped_objective", "dpo_loss", "compute_gae"):
        function = getattr(functions, name)
        try:
            function(*_lab_shaped_inputs(name))
        except StudentFunctionError as exc:
            problems.append(str(exc))
            continue
        make_args, expected, what = _VISIBLE[name]
        (args,) = make_args()
        try:
            with torch.no_grad():  # a value check: the lab-shaped call above checked the gradient
                got = function(*args).flatten().tolist()
        except StudentFunctionError as exc:
            warnings.append(t("{name} fails on {example}: {error}", name=name, example=t(what), error=exc))
            continue
        if len(got) != len(expected) or any(abs(g - e) > 1e-3 for g, e in zip(got, expected)):
            shown = ", ".join(f"{g:.4f}" for g in got[:5])
            warnings.append(t("{name} does not pass its visible test: {example} gives [{got}], expected [{expected}]; "
                              "the lab trains with it anyway", name=name, example=t(what), got=shown,
                              expected=", ".join(f"{e:.4f}" for e in expected)))
    if len(problems) == 1:
        raise StudentFunctionError(problems[0])
    if problems:
        raise StudentFunctionError(t("{count} functions are not ready: ", count=len(problems)) + t("; ").join(problems))
    return warnings
