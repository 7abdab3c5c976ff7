"""Calling a student's function and recording what it did, as plain data.

This is the only part of grading that runs student code, so it is kept apart from judging:
in the sandbox it turns each test case into an :class:`Observation` (tensors, strings and
numbers only), which crosses the process boundary through :func:`to_wire` / :func:`from_wire`.
``from_wire`` loads with ``weights_only=True``: only plain tensors and containers come back,
never an object whose class the student defined (a tensor subclass with a friendly ``__eq__``
arrives as the name of its type).
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Case:
    """One call of the student's function.

    ``args`` are positional arguments (tensors or floats); ``grad_wrt`` lists the indices of
    tensor arguments that get ``requires_grad=True``; the gradient of ``output.sum()`` with
    respect to them is recorded.
    """

    args: tuple
    grad_wrt: tuple[int, ...] = ()
    note: str = ""


@dataclass
class Observation:
    """What one call produced.  ``value`` is a plain torch.Tensor, or None with ``value_type``
    naming what was returned instead."""

    value: torch.Tensor | None = None
    value_type: str = "Tensor"
    error: str | None = None
    grads: dict[int, torch.Tensor | None] = field(default_factory=dict)
    grad_error: str | None = None
    args_after: tuple = ()


def _fresh_args(case: Case) -> tuple:
    fresh = []
    for index, arg in enumerate(case.args):
        if isinstance(arg, torch.Tensor):
            arg = arg.detach().clone()
            if index in case.grad_wrt:
                arg.requires_grad_(True)
        fresh.append(arg)
    return tuple(fresh)


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    """A detached copy as an exact torch.Tensor (never a subclass)."""
    return tensor.detach().as_subclass(torch.Tensor).clone()


def observe(function: Callable, case: Case) -> Observation:
    """Call ``function`` on a fresh copy of the case's inputs and record everything."""
    args = _fresh_args(case)
    observation = Observation()
    # A warning printed to stderr must never cost a correct answer its points.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = function(*args)
        except Exception as exc:  # the student's bug is data here, not a crash
            observation.error = f"raised {type(exc).__name__}: {exc}"
            return observation
        if type(value) is not torch.Tensor:
            observation.value_type = type(value).__name__
        elif case.grad_wrt:
            try:
                value.sum().backward()
                observation.grads = {i: (None if args[i].grad is None else _plain(args[i].grad))
                                     for i in case.grad_wrt}
            except Exception as exc:
                observation.grad_error = f"{type(exc).__name__}: {exc}"
    if type(value) is torch.Tensor:
        observation.value = _plain(value)
    observation.args_after = tuple(_plain(a) if isinstance(a, torch.Tensor) else a for a in args)
    return observation


def to_wire(observation: Observation) -> bytes:
    buffer = io.BytesIO()
    torch.save({"value": observation.value, "value_type": str(observation.value_type),
                "error": observation.error, "grads": dict(observation.grads),
                "grad_error": observation.grad_error, "args_after": list(observation.args_after)}, buffer)
    return buffer.getvalue()


def from_wire(data: bytes) -> Observation:
    raw = torch.load(io.BytesIO(data), weights_only=True)
    observation = Observation(value=raw["value"], value_type=raw["value_type"], error=raw["error"],
                              grads=raw["grads"], grad_error=raw["grad_error"], args_after=tuple(raw["args_after"]))
    for tensor in [observation.value, *observation.grads.values(), *observation.args_after]:
        if tensor is not None and isinstance(tensor, torch.Tensor) and type(tensor) is not torch.Tensor:
            raise TypeError("observation carried a tensor subclass")
    return observation
