"""Hidden checks for the KL-penalty exercise (source/kl_penalty/).  INSTRUCTOR ONLY: never released.

The student writes ``kl_estimator_k3(log_p, ref_log_p)``: per token, with d = ref_log_p - log_p
(the log of r = pi_ref / pi at a token sampled from pi), k3 = (r - 1) - log r = expm1(d) - d.
The harness is :mod:`rlhf_course.grading.checks`; this module holds the cases, the float64
reference and the list of checks only.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from rlhf_course.grading.checks import (Check, Recall, by_id, compare, generator, gradients, run, uniform,
                                        phrasebook, translated_messages, unmodified, unmodified_only)
from rlhf_course.grading.sandbox.observe import Case, Observation


# Sentences a student reads after a failure, in their edition's language (i18n/<base>.<language>.json, "details").
say = phrasebook(__file__)

KL_ARGS = ("log_p", "ref_log_p")


def kl_reference(log_p: torch.Tensor, ref_log_p: torch.Tensor) -> torch.Tensor:
    """k3 per token in float64, from the exact difference of the (float32 or float64) inputs."""
    d = ref_log_p.double() - log_p.double()
    return torch.expm1(d) - d


def run_check(check_id: str, function: Callable) -> None:
    """Used by a hidden test cell: raise ``CheckFailed`` naming the property when it fails."""
    run(CHECKS[check_id], function, translated_messages(__file__))


def _log_probs(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Log-probabilities of sampled tokens: log of values in (0.01, 1)."""
    return torch.log(uniform(gen, 0.01, 1.0, *shape))


def _value_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return compare(obs.value, kl_reference(*case.args), rtol=1e-5, atol=1e-7, what="k3")


def _visible_cases() -> list[Case]:
    log_p = torch.log(torch.tensor([0.5, 0.25, 0.25]))
    ref_log_p = torch.log(torch.tensor([0.25, 0.5, 0.25]))
    return [Case((log_p, ref_log_p)), Case((log_p, log_p.clone()), note=say("equal inputs"))]


def _visible_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    detail = compare(obs.value, kl_reference(*case.args), rtol=0, atol=1e-4, what="k3")
    return detail or unmodified_only(case, obs, KL_ARGS)


def _value_cases() -> list[Case]:
    gen = generator(401)
    return [Case((_log_probs(gen, 4, 7), _log_probs(gen, 4, 7)), note=say("float64, shape {shape}", shape=(4, 7))),
            Case((_log_probs(gen, 9).float(), _log_probs(gen, 9).float()), note=say("float32, shape {shape}", shape=(9,)))]


def _nonnegative_cases() -> list[Case]:
    gen = generator(402)
    log_p = _log_probs(gen, 3, 5).float()
    far = torch.log(uniform(gen, 1e-4, 1.0, 3, 5)).float()
    return [Case((log_p, log_p.clone()), note=say("equal inputs")), Case((log_p, far), note=say("pi_ref far from pi"))]


def _nonnegative_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    value = obs.value
    if tuple(value.shape) != tuple(case.args[0].shape):
        return say("k3 has shape {shape}, expected {expected}", shape=tuple(value.shape), expected=tuple(case.args[0].shape))
    if torch.equal(case.args[0], case.args[1]) and not torch.equal(value, torch.zeros_like(value)):
        return say("k3 must be exactly 0 where pi_ref = pi, got {got:.3g}", got=value.detach().abs().max().item())
    if (value < 0).any():
        return say("k3 is negative ({got:.3g}); (r - 1) - log r >= 0 for every r > 0", got=value.detach().min().item())
    return None


def _close_cases() -> list[Case]:
    gen = generator(403)
    log_p = _log_probs(gen, 64).float()
    magnitude = torch.exp(uniform(gen, math.log(1e-4), math.log(3e-3), 64))
    sign = torch.where(torch.rand(64, generator=gen) < 0.5, -1.0, 1.0).double()
    ref_log_p = (log_p.double() + sign * magnitude).float()
    return [Case((log_p, ref_log_p), note=say("float32, |ref_log_p - log_p| between 1e-4 and 3e-3"))]


def _close_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    # k3 is about d^2 / 2 here (1e-9 .. 5e-6): exp(d) - 1 in float32 loses it to rounding.
    return compare(obs.value, kl_reference(*case.args), rtol=1e-2, atol=0, what="k3")


def _gradient_cases() -> list[Case]:
    gen = generator(404)
    return [Case((_log_probs(gen, 2, 6), _log_probs(gen, 2, 6)), grad_wrt=(0,), note=say("float64, shape {shape}", shape=(2, 6))),
            Case((_log_probs(gen, 5), _log_probs(gen, 5)), grad_wrt=(0,), note=say("float64, shape {shape}", shape=(5,))),
            Case((_log_probs(gen, 7).float(), _log_probs(gen, 7).float()), grad_wrt=(0,),
                 note=say("float32, shape {shape}", shape=(7,)))]


def _gradient_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    log_p, ref_log_p = case.args
    if tuple(obs.value.shape) != tuple(log_p.shape):
        return say("k3 has shape {shape}, expected one value per token {expected}", shape=tuple(obs.value.shape), expected=tuple(log_p.shape))
    if obs.value.dtype != log_p.dtype:
        return say("k3 has dtype {dtype}; the contract keeps the log-probs' dtype {expected}", dtype=obs.value.dtype, expected=log_p.dtype)
    # d k3 / d log_p = (e^d - 1) * d(d)/d(log_p) = 1 - r
    return gradients(case, obs, {0: 1.0 - torch.exp(ref_log_p - log_p)}, KL_ARGS)


def _unmodified_cases() -> list[Case]:
    gen = generator(405)
    return [Case((_log_probs(gen, 8), _log_probs(gen, 8)))]


def _unmodified_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return unmodified(case, obs, KL_ARGS, recall)


_K3 = "kl_estimator_k3"

_ALL = [
    Check("kl_visible_tests", _K3, "the visible example (0.1931, 0.3069, 0) and 0 for equal inputs",
          _visible_cases, _visible_judge, visible=True),
    Check("kl_values", _K3, "k3 = (r - 1) - log r per token, with r = exp(ref_log_p - log_p)",
          _value_cases, _value_judge),
    Check("kl_zero_when_equal_and_nonnegative", _K3,
          "k3 is exactly 0 where the policy and the reference agree, and never negative",
          _nonnegative_cases, _nonnegative_judge),
    Check("kl_stable_when_close", _K3,
          "k3 stays accurate in float32 when the log-probs are close (use torch.expm1, not exp(d) - 1)",
          _close_cases, _close_judge),
    Check("kl_gradient_and_shape", _K3,
          "one value per token, in the log-probs' dtype, with gradient 1 - r with respect to log_p",
          _gradient_cases, _gradient_judge),
    Check("kl_inputs_unmodified", _K3, "kl_estimator_k3 must not modify its inputs",
          _unmodified_cases, _unmodified_judge),
]

CHECKS: dict[str, Check] = by_id(_ALL)
HIDDEN_CHECKS = {check.id: check for check in _ALL if not check.visible}


def checks_for(function_name: str, *, hidden_only: bool = True) -> list[Check]:
    return [check for check in _ALL if check.function == function_name and not (hidden_only and check.visible)]
