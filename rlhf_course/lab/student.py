"""The student's three functions, wrapped so that a bug stops the lab with one clear sentence."""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Callable

import torch


class StudentFunctionError(RuntimeError):
    """Raised when a student's function fails; the message names the function and the problem."""


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}, line {last.lineno}: {last.line})"


def _guard(function: Callable, name: str, expected_shape: Callable[..., tuple], needs_grad: bool):
    def guarded(*args, **kwargs):
        try:
            result = function(*args, **kwargs)
        except NotImplementedError:
            raise StudentFunctionError(f"{name} is not implemented yet: complete it in the notebook first") from None
        except Exception as exc:
            raise StudentFunctionError(f"{name} raised {type(exc).__name__}: {exc}{_where(exc)}") from None
        if type(result) is not torch.Tensor:
            raise StudentFunctionError(f"{name} must return a torch.Tensor, got {type(result).__name__}")
        want = expected_shape(*args, **kwargs)
        if tuple(result.shape) != want:
            raise StudentFunctionError(f"{name} returned shape {tuple(result.shape)}, expected {want}")
        if not torch.isfinite(result).all():
            raise StudentFunctionError(f"{name} returned NaN or infinite values: {result.detach().flatten()[:5].tolist()}")
        if needs_grad and torch.is_grad_enabled() and not result.requires_grad:
            raise StudentFunctionError(f"{name} returned a tensor with no gradient: use torch operations on its inputs")
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
            _guard(ppo_clipped_objective, "ppo_clipped_objective", lambda *a, **k: (), needs_grad=True),
            _guard(dpo_loss, "dpo_loss", lambda log_p_w, *a, **k: tuple(log_p_w.shape), needs_grad=True),
            _guard(compute_gae, "compute_gae", lambda rewards, *a, **k: tuple(rewards.shape), needs_grad=False),
        )
