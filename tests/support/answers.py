"""An answer cell's function, and the checks it fails, for the in-process tests of an assignment's checks."""
from __future__ import annotations

import functools
import math
from typing import Callable

import torch

from rlhf_course.grading.checks import Check, evaluate


def function_from(cell_source: str, name: str) -> Callable:
    """The function ``name`` an answer cell defines, run with the notebook's set-up names (torch, math, F)."""
    namespace = {"torch": torch, "math": math, "F": torch.nn.functional}
    exec(compile(cell_source, "answer", "exec"), namespace)
    return namespace[name]


def lost_by(checks: dict[str, Check], function: Callable) -> set[str]:
    """The grade ids of the checks ``function`` fails."""
    return {check.id for check in checks.values() if evaluate(check, function) is not None}


def for_assignment(checks: dict[str, Check], name: str) -> tuple[Callable, Callable]:
    """``function_from`` and ``lost_by`` bound to one function's name and its checks (an assignment with
    several functions: the checks that call ``name``)."""
    own = {check_id: check for check_id, check in checks.items() if check.function == name}
    return functools.partial(function_from, name=name), functools.partial(lost_by, own)
