"""Hidden checks for the GRPO exercise (source/grpo/).  INSTRUCTOR ONLY: never released.

The student writes ``group_relative_advantages(rewards, scale_by_std=True, eps=1e-4)``: for rewards of
shape (P, G), G sampled responses to each of P prompts, each reward minus its group's mean (dim 1),
divided by (the group's Bessel-corrected std + eps) when ``scale_by_std`` (TRL's GRPOTrainer), left
unscaled otherwise (Dr. GRPO); a group of one response, or of equal rewards whose float mean is exact, gives zeros,
never NaN.
The harness is :mod:`rlhf_course.grading.checks`; this module holds the cases, the float64 reference
and the list of checks only.
"""
from __future__ import annotations

from typing import Callable

import torch

from rlhf_course.grading.checks import (Check, Recall, by_id, compare, generator, phrasebook, run, short,
                                        translated_messages, uniform, unmodified, unmodified_only)
from rlhf_course.grading.sandbox.observe import Case, Observation


# Sentences a student reads after a failure, in their edition's language (i18n/<base>.<language>.json, "details").
say = phrasebook(__file__)

GRPO_ARGS = ("rewards", "scale_by_std", "eps")
DEFAULT_EPS = 1e-4


def advantages_reference(rewards: torch.Tensor, scale_by_std: bool = True, eps: float = DEFAULT_EPS,
                         correction: int = 1) -> torch.Tensor:
    """The contract in float64: per group (row), r - mean, over (Bessel std + eps) when scaled; zeros
    for a group of one (its std is undefined: nothing to compare the response with).  ``correction=0``:
    the population std instead (divides by G), what the checks of properties that do not depend on the
    std's normalisation also accept."""
    r = rewards.double()
    if r.shape[1] < 2:
        return torch.zeros_like(r)
    centred = r - r.mean(1, keepdim=True)
    return centred / (r.std(1, correction=correction, keepdim=True) + eps) if scale_by_std else centred


def run_check(check_id: str, function: Callable) -> None:
    """Used by a hidden test cell: raise ``CheckFailed`` naming the property when it fails."""
    run(CHECKS[check_id], function, translated_messages(__file__))


def _rewards(gen: torch.Generator, prompts: int, group: int, dtype=torch.float32) -> torch.Tensor:
    """Reward-model scores: each prompt's group around its own level (levels far apart)."""
    level = uniform(gen, -3.0, 3.0, prompts, 1)
    spread = uniform(gen, 0.2, 2.0, prompts, 1)
    return (level + spread * torch.randn(prompts, group, generator=gen, dtype=torch.float64)).to(dtype)


def _args(case: Case) -> tuple[torch.Tensor, bool, float]:
    rewards, *rest = case.args
    scale_by_std = rest[0] if rest else True
    eps = rest[1] if len(rest) > 1 else DEFAULT_EPS
    return rewards, scale_by_std, eps


def _references(case: Case, *, any_std: bool = False) -> list[torch.Tensor]:
    """What a check that is not about eps accepts: the contract at the case's eps, and, when that is not the
    default, also at the default eps, for an answer that writes 1e-4 where it should use its ``eps``
    argument.  That one mistake is then decided by ``grpo_eps_outside_sqrt`` alone, not by every check
    whose cases pass eps = 0.  ``any_std``: also the same with the population std, for the checks of
    properties that do not depend on the std's normalisation (that mistake is ``grpo_bessel_std``'s)."""
    rewards, scale_by_std, eps = _args(case)
    corrections = (1, 0) if any_std and scale_by_std else (1,)
    epsilons = (eps, DEFAULT_EPS) if scale_by_std and eps != DEFAULT_EPS else (eps,)
    return [advantages_reference(rewards, scale_by_std, e, c) for c in corrections for e in epsilons]


def _compare_to_contract(case: Case, obs: Observation, *, rtol: float, atol: float,
                         any_std: bool = False) -> str | None:
    """None when the result is the contract's at the case's eps or at the default eps (``_references``;
    with ``any_std``, also with the population std); else what differs from the contract at the case's eps."""
    details = [compare(obs.value, expected, rtol=rtol, atol=atol, what="advantages")
               for expected in _references(case, any_std=any_std)]
    return None if None in details else details[0]


def _value_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return _compare_to_contract(case, obs, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- visible

VISIBLE_REWARDS = ((1.0, 0.0, 0.0, 1.0), (1.0, 3.0, 4.0, 8.0))


def _visible_cases() -> list[Case]:
    rewards = torch.tensor(VISIBLE_REWARDS)
    return [Case((rewards,)), Case((rewards, False))]


def _visible_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    detail = compare(obs.value, advantages_reference(*_args(case)), rtol=0, atol=1e-4, what="advantages")
    return detail or unmodified_only(case, obs, GRPO_ARGS)


# ----------------------------------------------------------------------------- hidden

def _value_cases() -> list[Case]:
    gen = generator(501)
    # eps = 0 here and in the checks below that are not about eps, so that eps inside the square root is
    # decided by grpo_eps_outside_sqrt alone; their judges also accept the advantages at the default eps, so
    # that an eps ignored for 1e-4 is too (``_references``): each check decides one property.
    return [Case((_rewards(gen, 6, 8), True, 0.0), note=say("eps = 0, shape {shape}", shape=(6, 8))),
            Case((_rewards(gen, 3, 16), True, 0.0), note=say("eps = 0, shape {shape}", shape=(3, 16))),
            Case((_rewards(gen, 2, 5).double(), True, 0.0), note=say("float64, eps = 0, shape {shape}", shape=(2, 5)))]


def _bessel_cases() -> list[Case]:
    gen = generator(502)
    return [Case((_rewards(gen, 4, 2), True, 0.0), note=say("groups of {size}, eps = 0", size=2)),
            Case((_rewards(gen, 4, 3), True, 0.0), note=say("groups of {size}, eps = 0", size=3))]


def _bessel_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    detail = _compare_to_contract(case, obs, rtol=1e-5, atol=1e-6)
    if detail is None:
        return None
    rewards, _, eps = _args(case)
    population = rewards.double().std(1, correction=0, keepdim=True)
    as_population = (rewards.double() - rewards.double().mean(1, keepdim=True)) / (population + eps)
    if compare(obs.value, as_population, rtol=1e-4, atol=1e-6) is None:
        return say("the std is the population std (divides by G); the contract's is torch.std's, which divides by G - 1")
    return detail


def _eps_cases() -> list[Case]:
    gen = generator(503)
    # Groups whose rewards differ by about 1e-4: the std is as small as eps, so where eps sits decides.
    base = uniform(gen, -1.0, 1.0, 3, 1)
    rewards = base + 1e-4 * torch.randn(3, 6, generator=gen, dtype=torch.float64)
    return [Case((rewards,), note=say("float64, rewards within about 1e-4 of each other, default eps")),
            Case((rewards, True, 1e-2), note="float64, eps = 0.01")]


# Where eps sits changes these advantages 10- to 50-fold (sqrt(var + eps) against std + eps, with a std near
# 1e-4), and so does ignoring eps = 0.01; float32 rounding of rewards 1e-4 apart changes them by about 1e-3, and
# the population std by sqrt(G / (G - 1)) - 1 = 10 %: neither is this check's business.
_EPS_RTOL = 0.05


def _eps_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    rewards, scale_by_std, eps = _args(case)
    placed_right = [compare(obs.value, advantages_reference(rewards, scale_by_std, eps, correction),
                            rtol=_EPS_RTOL, atol=1e-9, what="advantages") for correction in (1, 0)]
    if None in placed_right:
        return None
    detail = placed_right[0]
    if eps != DEFAULT_EPS and any(compare(obs.value, advantages_reference(rewards, scale_by_std, DEFAULT_EPS, correction),
                                          rtol=_EPS_RTOL, atol=1e-9) is None for correction in (1, 0)):
        return say("{detail}: the eps argument is ignored (these are the advantages for eps = 1e-4)", detail=detail)
    if compare(obs.value, advantages_reference(rewards, False, eps), rtol=_EPS_RTOL, atol=1e-9) is None:
        # where eps sits is moot when nothing is divided: say what is missing, not where eps goes
        return say("{detail}: the advantages are not divided by the group's std at all", detail=detail)
    return say("{detail}: eps is added to the std, outside the square root", detail=detail)


def _unscaled_cases() -> list[Case]:
    gen = generator(504)
    return [Case((_rewards(gen, 5, 6), False), note="scale_by_std=False"),
            Case((_rewards(gen, 2, 9, torch.float64), False, 0.5), note="scale_by_std=False, eps = 0.5")]


def _per_group_cases() -> list[Case]:
    gen = generator(505)
    rewards = _rewards(gen, 4, 6, torch.float64)
    rewards[:, :] += torch.tensor([[-50.0], [-5.0], [5.0], [50.0]], dtype=torch.float64)
    return [Case((rewards, False), note=say("groups at levels -50, -5, 5, 50")),
            Case((rewards, True, 0.0), note=say("groups at levels -50 .. 50, eps = 0"))]


def _per_group_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    value = obs.value
    if tuple(value.shape) != tuple(case.args[0].shape):
        return say("advantages have shape {shape}, expected {expected}", shape=tuple(value.shape), expected=tuple(case.args[0].shape))
    # Centred on the group's own mean, whatever the scale: how the advantages are scaled (the std, eps, the
    # leave-one-out baseline's G / (G - 1), scaling when told not to) is the other checks' business.
    return _centred_rows(value)


def _centred_rows(value: torch.Tensor) -> str | None:
    """None when each row sums to 0: the batch's mean leaves row sums of tens to hundreds in these cases, float32
    rounding of rewards near +-50 about 1e-5, whatever the scale."""
    row_sums = value.double().sum(1)
    if not torch.isfinite(row_sums).all() or (row_sums.abs() > 1e-3 * (1 + value.double().abs().sum(1))).any():
        return say("each group's advantages must sum to 0 (centred on that group's own mean), row sums {sums}", sums=short(row_sums))
    return None


def _degenerate_cases() -> list[Case]:
    gen = generator(506)
    single = _rewards(gen, 5, 1)
    equal = torch.full((3, 4), 0.75)  # exactly representable: every mean of it is exact
    mixed = torch.cat([torch.full((1, 4), -1.25), 3 * _rewards(gen, 2, 4)])
    return [Case((single,), note=say("groups of one response")), Case((single, False), note=say("groups of one, unscaled")),
            Case((equal,), note=say("every reward equal")), Case((mixed,), note=say("one group of equal rewards among others"))]


def _degenerate_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    value = obs.value
    if tuple(value.shape) != tuple(case.args[0].shape):
        return say("advantages have shape {shape}, expected {expected}", shape=tuple(value.shape), expected=tuple(case.args[0].shape))
    if not torch.isfinite(value).all():
        return say("advantages must be finite (a group with no spread gives 0 when its mean is exact), got {values}", values=short(value))
    rewards = case.args[0]
    flat = (rewards == rewards[:, :1]).all(1)  # the groups with no spread
    detail = compare(value[flat], torch.zeros_like(value[flat]), rtol=0, atol=1e-6, what=say("advantages of a group with no spread"))
    # the other groups only have to be left as the contract says (their spread makes eps negligible here)
    # the other groups only have to stay finite and centred: how they are scaled is the value checks' business
    return detail or _centred_rows(value[~flat])


def _dtype_cases() -> list[Case]:
    gen = generator(507)
    return [Case((_rewards(gen, 3, 7, torch.float64), True, 0.0), note="float64, eps = 0"),
            Case((_rewards(gen, 3, 7, torch.float64), False), note=say("float64, unscaled")),
            Case((_rewards(gen, 2, 4, torch.float32), True, 0.0), note="float32, eps = 0"),
            Case((_rewards(gen, 3, 1, torch.float64),), note=say("float64, groups of one response"))]


def _dtype_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """The dtype and shape, and for float64 rewards float64 accuracy: a result within float32 rounding of the
    advantages (either std's) but not within float64's was computed in float32.  A result further off is
    wrong in value, which the value checks judge, not this one."""
    rewards = case.args[0]
    if obs.value.dtype != rewards.dtype:
        return say("advantages have dtype {dtype}; the contract keeps the rewards' dtype {expected}", dtype=obs.value.dtype, expected=rewards.dtype)
    if tuple(obs.value.shape) != tuple(rewards.shape):
        return say("advantages have shape {shape}, expected {expected}", shape=tuple(obs.value.shape), expected=tuple(rewards.shape))
    if rewards.dtype != torch.float64 or _compare_to_contract(case, obs, rtol=1e-12, atol=1e-12, any_std=True) is None:
        return None
    if _compare_to_contract(case, obs, rtol=1e-4, atol=1e-5, any_std=True) is None:
        return say("float64 rewards gave advantages only as accurate as float32 (computed in float32, then cast?)")
    return None


def _unmodified_cases() -> list[Case]:
    gen = generator(508)
    return [Case((_rewards(gen, 3, 5),)), Case((_rewards(gen, 3, 5), False))]


def _unmodified_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return unmodified(case, obs, GRPO_ARGS, recall)


_GRA = "group_relative_advantages"

_ALL = [
    Check("grpo_visible_tests", _GRA, "the visible example: both groups, scaled and unscaled",
          _visible_cases, _visible_judge, visible=True),
    Check("grpo_values", _GRA, "(r - group mean) / (group std + eps) per group when scale_by_std=True",
          _value_cases, _value_judge),
    Check("grpo_bessel_std", _GRA, "the group's std is torch.std's, Bessel-corrected (divides by G - 1), as in "
          "TRL's GRPOTrainer", _bessel_cases, _bessel_judge),
    Check("grpo_eps_outside_sqrt", _GRA, "eps (1e-4 by default) is added to the std, outside the square root",
          _eps_cases, _eps_judge),
    Check("grpo_unscaled", _GRA, "scale_by_std=False gives r - group mean, unscaled (Dr. GRPO)",
          _unscaled_cases, _value_judge),
    Check("grpo_per_group_mean", _GRA, "each group is centred on its own mean (over dim 1), never the batch's",
          _per_group_cases, _per_group_judge),
    Check("grpo_degenerate_groups", _GRA, "a group of one response, or of equal rewards with an exact mean, gives zeros, never NaN",
          _degenerate_cases, _degenerate_judge),
    Check("grpo_dtype_and_float64", _GRA, "the result keeps the rewards' shape and dtype, float64 at float64 accuracy "
          "(its values are the value checks' to judge)",
          _dtype_cases, _dtype_judge),
    Check("grpo_inputs_unmodified", _GRA, "group_relative_advantages must not modify its inputs",
          _unmodified_cases, _unmodified_judge),
]

CHECKS: dict[str, Check] = by_id(_ALL)
HIDDEN_CHECKS = {check.id: check for check in _ALL if not check.visible}


def checks_for(function_name: str, *, hidden_only: bool = True) -> list[Check]:
    return [check for check in _ALL if check.function == function_name and not (hidden_only and check.visible)]
