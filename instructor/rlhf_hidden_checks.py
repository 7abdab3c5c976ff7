"""Hidden checks for the RLHF assignment.  INSTRUCTOR ONLY: never released.

Each check is plain data plus two small functions:

* ``cases()`` builds the inputs (seeded, different from the notebook's visible examples);
* ``judge(case, observation)`` compares what the student's function produced with an
  expected value computed here independently, in float64, and returns ``None`` (pass) or a
  short description of what was wrong.

The harness that runs them (``Check``, judging, comparison helpers) is the package's
:mod:`rlhf_course.grading.checks`: the same checks run inside the notebook kernel (``run_check``,
used by the hidden test cells) or with the call made in a sandboxed process and the judging done
by the trusted grader, which reads only ``CHECKS`` from here.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from rlhf_course.grading.checks import (Check, CheckFailed, Recall, by_id, changed_input, compare,  # noqa: F401
                                        evaluate, generator, gradients, judge_observation, run, short, uniform,
                                        Finding, phrasebook, translated_messages, unmodified, unmodified_only)
from rlhf_course.grading.sandbox.observe import Case, Observation


# Sentences a student reads after a failure, in their edition's language (i18n/<base>.<language>.json, "details").
say = phrasebook(__file__)


def run_check(check_id: str, function: Callable) -> None:
    """Used by a hidden test cell: raise ``CheckFailed`` naming the property when it fails."""
    run(CHECKS[check_id], function, translated_messages(__file__))


# --------------------------------------------------------------------------------------
# TODO 1: PPO clipped objective
# --------------------------------------------------------------------------------------

PPO_ARGS = ("ratio", "advantage", "clip_epsilon")


def ppo_reference(ratio: torch.Tensor, advantage: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-token clipped surrogate, written as the case table (not as min/clamp)."""
    r = ratio.to(torch.float64)
    a = torch.broadcast_to(advantage.to(torch.float64), r.shape)
    upside_capped = a * torch.minimum(r, torch.full_like(r, 1 + eps))
    downside_capped = a * torch.maximum(r, torch.full_like(r, 1 - eps))
    return torch.where(a >= 0, upside_capped, downside_capped)


def ppo_reference_grad(ratio, advantage, eps) -> torch.Tensor:
    """d(per-token objective)/d ratio: A where the unclipped term is active, else 0."""
    r = ratio.to(torch.float64)
    a = torch.broadcast_to(advantage.to(torch.float64), r.shape)
    active = torch.where(a >= 0, r < 1 + eps, r > 1 - eps)
    return torch.where(active, a, torch.zeros_like(a))


def _log_uniform(gen: torch.Generator, low: float, high: float, count: int) -> torch.Tensor:
    """``count`` ratios spread over [low, high] on a log scale, one drawn in each of ``count``
    equal slices of [log low, log high]: seeded, and always spanning every order of magnitude."""
    edges = torch.linspace(math.log(low), math.log(high), count + 1, dtype=torch.float64)
    u = torch.rand(count, generator=gen, dtype=torch.float64)
    return torch.exp(edges[:-1] + u * (edges[1:] - edges[:-1]))


def _ppo_single_tokens(seed: int, r_low: float, r_high: float, a_sign: float, eps: float,
                       count: int = 6, note: str = "", log_scale: bool = False) -> list[Case]:
    """Single-token calls: the mean over one token is the token itself, so these cases
    test the per-token formula without depending on the reduction.  ``log_scale`` spreads the
    ratios over orders of magnitude (1e-3 to 1e3): objectives that differ from PPO's only for
    large or tiny ratios (dual-clip PPO's extra bound for A < 0) must not pass."""
    gen = generator(seed)
    r = (_log_uniform(gen, r_low, r_high, count) if log_scale else uniform(gen, r_low, r_high, count)).float()
    a = (a_sign * uniform(gen, 0.2, 3.0, count)).float()
    return [Case((r[i:i + 1], a[i:i + 1], eps), note=note or _one_token_note(float(r[i]), float(a[i]), eps))
            for i in range(count)]


def _one_token_note(ratio: float, advantage: float, eps: float) -> Finding:
    """A one-token case as the instructor reads it (with its values) and as a student does: where the ratio lies
    against the clip range, and the advantage's sign.  Never the values: they would be the whole case, the same for
    every student and every term."""
    band = "r < 1 - eps" if ratio < 1 - eps else "r > 1 + eps" if ratio > 1 + eps else "1 - eps <= r <= 1 + eps"
    sign = "A > 0" if advantage > 0 else "A < 0" if advantage < 0 else "A = 0"
    regime = say("one token, {band}, {sign}, eps = {eps:g}", band=Finding(band), sign=Finding(sign), eps=eps)
    return Finding(f"{regime.public}; ratio={ratio:.4g}, A={advantage:.3f}", regime.public)


def _ppo_value_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    if obs.value.dim() != 0:
        return say("must return a 0-d tensor (the mean), got shape {shape}", shape=tuple(obs.value.shape))
    ratio, advantage, eps = case.args
    per_token = ppo_reference(ratio, advantage, eps)
    # float32 rounding of the terms (up to 3e3 in size) may survive in a mean that cancels
    scale = float(per_token.abs().mean())
    return compare(obs.value, per_token.mean(), rtol=1e-5, atol=1e-6 + 1e-5 * scale, what="objective")


def _ppo_eps_cases() -> list[Case]:
    # eps = 0: every ratio on the capped side is cut to exactly 1; eps = 1e4: 1 + eps is far above
    # any ratio here and 1 - eps below zero, so nothing may be clipped, however large the ratio.
    cases = _ppo_single_tokens(11, 1e-3, 1e3, +1, 0.0, count=4, log_scale=True)
    cases += _ppo_single_tokens(12, 1e-3, 1e3, -1, 0.0, count=4, log_scale=True)
    cases += _ppo_single_tokens(13, 1e-3, 1e3, +1, 1e4, count=4, log_scale=True)
    cases += _ppo_single_tokens(14, 1e-3, 1e3, -1, 1e4, count=4, log_scale=True)
    return cases


def _ppo_mixed_cases() -> list[Case]:
    # At the default eps, as every check but ppo_epsilon_extremes: an answer that writes 0.8 and 1.2 instead
    # of using clip_epsilon loses that cell alone.
    gen, eps = generator(21), 0.2
    cases = []
    for _ in range(3):
        r = _log_uniform(gen, 1e-3, 1e3, 64)[torch.randperm(64, generator=gen)].float()
        a = torch.randn(64, generator=gen, dtype=torch.float64).float()
        cases.append(Case((r, a, eps), note=say("64 tokens, ratios from 1e-3 to 1e3, mixed-sign advantages, eps={eps}", eps=eps)))
    return cases


def _ppo_zero_advantage_cases() -> list[Case]:
    gen = generator(31)
    r = _log_uniform(gen, 1e-3, 1e3, 9).float()
    return [Case((r, torch.zeros(9), 0.2), grad_wrt=(0,), note=say("A = 0 for all tokens"))]


def _ppo_zero_advantage_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    detail = _ppo_value_judge(case, obs, recall)
    if detail is None:
        detail = gradients(case, obs, {0: torch.zeros(9, dtype=torch.float64)}, PPO_ARGS)
    return detail


def _ppo_reduction_cases() -> list[Case]:
    gen = generator(41)
    cases = []
    for count in (7, 50):
        r = uniform(gen, 0.3, 2.2, count).float()
        a = torch.randn(count, generator=gen, dtype=torch.float64).float()
        cases.append(Case((r, a, 0.2), note=say("{count} tokens", count=count)))
    return cases


def _ppo_reduction_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """The batch objective must be the mean of the student's own per-token objectives."""
    if obs.value.dim() != 0:
        return say("must return a 0-d tensor (the mean), got shape {shape}", shape=tuple(obs.value.shape))
    ratio, advantage, eps = case.args
    per_token = []
    singles = recall([Case((ratio[i:i + 1], advantage[i:i + 1], eps)) for i in range(ratio.numel())])
    for single in singles:
        if single.error or type(single.value) is not torch.Tensor or single.value.numel() != 1:
            return say("could not evaluate the objective on a single token")
        per_token.append(single.value.reshape(()).to(torch.float64))
    per_token = torch.stack(per_token)
    if torch.all(per_token == per_token[0]):
        return say("the objective does not depend on the ratio and advantage")
    expected = per_token.mean()
    return compare(obs.value, expected, rtol=1e-5, atol=1e-6,
                    what=say("objective on the batch (vs the mean of its per-token objectives)"))


def _ppo_broadcast_cases() -> list[Case]:
    gen = generator(51)
    r = uniform(gen, 0.3, 2.2, 4, 6).float()
    a = torch.randn(4, 1, generator=gen, dtype=torch.float64).float()
    return [Case((r, a, 0.2), note=say("ratio (4, 6), advantage (4, 1): one advantage per sequence"))]


def _ppo_broadcast_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    if obs.value.dim() != 0:
        return say("must return a 0-d tensor, got shape {shape}", shape=tuple(obs.value.shape))
    ratio, advantage, eps = case.args
    flat_r = ratio.reshape(-1)
    flat_a = advantage.expand_as(ratio).reshape(-1)
    flat = recall(Case((flat_r, flat_a, eps)))
    if flat.error or type(flat.value) is not torch.Tensor:
        return say("could not evaluate the objective on the flattened tokens")
    moved = recall(Case((ratio * 0.8, advantage, eps)))
    if type(moved.value) is torch.Tensor and torch.equal(moved.value, obs.value):
        return say("the objective does not depend on the ratio")
    return compare(obs.value, flat.value.to(torch.float64), rtol=1e-5, atol=1e-6,
                    what=say("objective for (B, T) ratios with (B, 1) advantages (vs the same tokens flattened)"))


def _ppo_gradient_cases() -> list[Case]:
    # Away from the clip boundaries 1 +- eps, where the gradient is not defined; ratios over six
    # orders of magnitude for both signs of A (dual-clip PPO's gradient vanishes for A < 0, r > 3).
    points = [(1e-3, 1.0), (0.05, 2.0), (0.5, 1.0), (0.9, 2.0), (1.1, 2.0), (1.5, 1.0), (30.0, 0.5),
              (1e3, 1.0),
              (1e-3, -1.0), (0.5, -1.0), (0.9, -2.0), (1.5, -1.0), (5.0, -0.5), (1e3, -1.0)]
    return [Case((torch.tensor([r]), torch.tensor([a]), 0.2), grad_wrt=(0,), note=_one_token_note(r, a, 0.2))
            for r, a in points]


def _ppo_gradient_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    ratio, advantage, eps = case.args
    return gradients(case, obs, {0: ppo_reference_grad(ratio, advantage, eps)}, PPO_ARGS)


def _ppo_unmodified_cases() -> list[Case]:
    gen = generator(61)
    r = uniform(gen, 0.2, 3.0, 12).float()
    a = torch.randn(12, generator=gen, dtype=torch.float64).float()
    return [Case((r, a, 0.2))]


def _ppo_unmodified_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return unmodified(case, obs, PPO_ARGS, recall)


def _ppo_float64_cases() -> list[Case]:
    gen = generator(71)
    r = uniform(gen, 0.3, 2.2, 10)
    a = torch.randn(10, generator=gen, dtype=torch.float64)
    return [Case((r, a, 0.2), note=say("float64 inputs"))]


def _ppo_float64_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """The dtype only: the objective's value is what the other PPO checks judge."""
    if obs.value.dtype != torch.float64:
        return say("float64 inputs gave a {dtype} result", dtype=obs.value.dtype)
    return None


# --------------------------------------------------------------------------------------
# TODO 2: DPO loss
# --------------------------------------------------------------------------------------

DPO_ARGS = ("log_p_w", "log_p_l", "ref_log_p_w", "ref_log_p_l", "beta")


def dpo_reference(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta) -> torch.Tensor:
    """softplus(-beta * h) in float64, with h the log-ratio margin, written stably."""
    h = ((log_p_w.double() - ref_log_p_w.double()) - (log_p_l.double() - ref_log_p_l.double()))
    z = beta * h
    return torch.clamp(-z, min=0) + torch.log1p(torch.exp(-z.abs()))


def _dpo_batch(seed: int, shape: tuple[int, ...], beta: float, dtype=torch.float32,
               scale: float = 3.0, note: str = "") -> Case:
    gen = generator(seed)
    tensors = tuple((-2.0 - scale * torch.rand(shape, generator=gen, dtype=torch.float64)).to(dtype)
                    for _ in range(4))
    return Case(tensors + (beta,), note=note)


def _dpo_value_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    expected = dpo_reference(*case.args)
    return compare(obs.value, expected, rtol=1e-4, atol=1e-5, what="loss")


def _dpo_zero_margin_cases() -> list[Case]:
    gen = generator(101)
    cases = []
    for beta in (0.1, 1.0, 5.0):
        lp = (-1 - 4 * torch.rand(5, generator=gen)).float()
        other = (-1 - 4 * torch.rand(5, generator=gen)).float()
        # h = (lp - other) - (lp - other) = 0 for every pair
        cases.append(Case((lp, lp.clone(), other, other.clone(), beta), note=say("beta={beta}, margin 0", beta=beta)))
    return cases


def _dpo_zero_margin_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return compare(obs.value, torch.full((5,), math.log(2.0), dtype=torch.float64),
                    rtol=1e-5, atol=1e-6, what=say("loss at zero margin (should be ln 2)"))


# The DPO checks other than dpo_beta_scales_margin call with the default beta (0.1; dpo_zero_margin_is_ln2 and
# dpo_reference_shift_invariance hold for any beta): an answer that writes 0.1 instead of using beta loses that
# cell alone.
def _dpo_value_cases() -> list[Case]:
    return [_dpo_batch(111, (16,), 0.1, note=say("{count} pairs, beta={beta}", count=16, beta=0.1)),
            _dpo_batch(112, (16,), 0.1, scale=6.0, note=say("{count} pairs, beta={beta}", count=16, beta=0.1))]


def _dpo_beta_cases() -> list[Case]:
    cases = []
    for seed, beta in ((121, 0.05), (122, 0.7), (123, 2.0)):
        cases.append(_dpo_batch(seed, (8,), beta, note=f"beta={beta}"))
    return cases


def _dpo_swap_cases() -> list[Case]:
    return [_dpo_batch(131, (8,), 0.1, note="beta=0.1")]


def _dpo_swap_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """L(l, w) - L(w, l) = beta * h: swapping chosen and rejected costs exactly the margin."""
    lp_w, lp_l, ref_w, ref_l, beta = case.args
    swapped = recall(Case((lp_l, lp_w, ref_l, ref_w, beta)))
    if swapped.error or type(swapped.value) is not torch.Tensor:
        return say("could not evaluate the loss with chosen and rejected swapped")
    if swapped.value.shape != obs.value.shape:
        return say("swapping chosen and rejected changed the output shape")
    h = (lp_w.double() - ref_w.double()) - (lp_l.double() - ref_l.double())
    return compare(swapped.value.double() - obs.value.double(), beta * h, rtol=1e-4, atol=1e-5,
                    what=say("L(swapped) - L(original), which should equal beta * margin,"))


def _dpo_shift_cases() -> list[Case]:
    return [_dpo_batch(141, (8,), 0.2, note="beta=0.2")]


def _dpo_shift_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """Adding the same constant to a policy log-prob and its reference changes nothing."""
    lp_w, lp_l, ref_w, ref_l, beta = case.args
    shifted_args = (lp_w + 1.5, lp_l - 2.0, ref_w + 1.5, ref_l - 2.0, beta)
    shifted = recall(Case(shifted_args))
    if shifted.error or type(shifted.value) is not torch.Tensor:
        return say("could not evaluate the loss on shifted inputs")
    other_margin = recall(Case((lp_w + 1.0, lp_l, ref_w, ref_l, beta)))
    if type(other_margin.value) is torch.Tensor and torch.equal(other_margin.value, obs.value):
        return say("the loss does not depend on the log-probabilities")
    return compare(shifted.value, obs.value.double(), rtol=1e-4, atol=1e-5,
                    what=say("loss after adding a constant to a (policy, reference) pair"))


def _dpo_stability_cases() -> list[Case]:
    # beta * h = -200 (policy strongly prefers the rejected answer) and +50.
    def pair(h: float, beta: float) -> Case:
        return Case((torch.tensor(-10.0), torch.tensor(-10.0 - h), torch.tensor(-10.0),
                     torch.tensor(-10.0), beta), grad_wrt=(0, 1),
                    note=say("float32, beta * margin = {value:g}", value=beta * h))
    return [pair(-2000.0, 0.1), pair(500.0, 0.1)]


def _dpo_stability_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    detail = compare(obs.value, dpo_reference(*case.args), rtol=1e-4, atol=1e-6, what="loss")
    if detail is None:
        detail = _dpo_gradient_judge(case, obs, recall)
    return detail


def _dpo_gradient_cases() -> list[Case]:
    """The contract is about the policy: gradients must reach log_p_w and log_p_l.  The reference
    log-probs come from a frozen model; a trainer computes them under ``torch.no_grad()`` or
    detaches them, so an answer may or may not pass a gradient to them, whether or not they
    require one."""
    frozen = _dpo_batch(151, (6,), 0.1, scale=4.0)
    tracked = _dpo_batch(152, (6,), 0.1, scale=4.0)
    return [Case(frozen.args, grad_wrt=(0, 1), note=say("beta={beta}, reference log-probs without gradient", beta=0.1)),
            Case(tracked.args, grad_wrt=(0, 1, 2, 3), note=say("beta={beta}, reference log-probs requiring grad", beta=0.1))]


def _dpo_gradient_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    lp_w, lp_l, ref_w, ref_l, beta = case.args
    h = (lp_w.double() - ref_w.double()) - (lp_l.double() - ref_l.double())
    weight = beta * torch.sigmoid(-beta * h)  # how hard this pair is still pushed
    signs = {0: -1.0, 1: +1.0, 2: +1.0, 3: -1.0}
    policy = {i: signs[i] * weight for i in case.grad_wrt if i in (0, 1)}
    detail = gradients(case, obs, policy, DPO_ARGS)
    if detail is not None:
        return detail
    # No gradient is owed to the reference; one that does reach it must still be the right one.
    reached = {i: signs[i] * weight for i in case.grad_wrt if i in (2, 3) and obs.grads.get(i) is not None}
    return gradients(case, obs, reached, DPO_ARGS)


def _dpo_shape_cases() -> list[Case]:
    return [_dpo_batch(161, (3, 5), 0.1, note=say("inputs of shape {shape}", shape=(3, 5))),
            _dpo_batch(162, (), 0.1, note=say("0-d inputs")),
            _dpo_batch(163, (7,), 0.1, note=say("inputs of shape {shape}", shape=(7,)))]


def _dpo_shape_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    want = tuple(case.args[0].shape)
    if tuple(obs.value.shape) != want:
        return say("loss has shape {shape}, expected {expected}: return one loss per pair, do not reduce",
                   shape=tuple(obs.value.shape), expected=want)
    return None


def _dpo_unmodified_cases() -> list[Case]:
    return [_dpo_batch(171, (6,), 0.1)]


def _dpo_unmodified_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return unmodified(case, obs, DPO_ARGS, recall)


# --------------------------------------------------------------------------------------
# TODO 3: GAE
# --------------------------------------------------------------------------------------

GAE_ARGS = ("rewards", "values", "next_value", "gamma", "gae_lambda")


def gae_reference(rewards, values, next_value, gamma, lam) -> torch.Tensor:
    """A_t = sum_l (gamma lambda)^l delta_{t+l}, the explicit lambda-weighted sum (no recursion)."""
    r = [float(x) for x in rewards.double()]
    v = [float(x) for x in values.double()] + [float(next_value)]
    deltas = [r[t] + gamma * v[t + 1] - v[t] for t in range(len(r))]
    advantages = [sum((gamma * lam) ** k * deltas[t + k] for k in range(len(r) - t))
                  for t in range(len(r))]
    return torch.tensor(advantages, dtype=torch.float64)


def _gae_episode(seed: int, length: int, *, sparse: bool = False, next_value: float = 0.0,
                 gamma: float = 0.99, lam: float = 0.95, note: str = "") -> Case:
    gen = generator(seed)
    if sparse:
        rewards = torch.zeros(length)
        rewards[-1] = float(uniform(gen, -2.0, 2.0, 1))
    else:
        rewards = torch.randn(length, generator=gen, dtype=torch.float64).float()
    values = torch.randn(length, generator=gen, dtype=torch.float64).float()
    return Case((rewards, values, next_value, gamma, lam),
                note=note or f"T={length}, gamma={gamma}, lambda={lam}, next_value={next_value}")


def _gae_value_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return compare(obs.value, gae_reference(*case.args), rtol=1e-4, atol=1e-4, what="advantages")


# Each GAE check calls with the default gamma and lambda (0.99, 0.95) but for the one its property names
# (lambda = 1, lambda = 0, gamma = 0; a single step does not depend on them): an answer that writes 0.99 or
# 0.95 instead of using its argument loses only the cells of that argument.
def _gae_value_cases() -> list[Case]:
    return [_gae_episode(201, 8), _gae_episode(202, 12, sparse=True)]


def _gae_lambda_one_cases() -> list[Case]:
    return [_gae_episode(211, 9, lam=1.0), _gae_episode(212, 6, sparse=True, lam=1.0)]


def _gae_lambda_one_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    """lambda = 1: the discounted Monte-Carlo return minus V(s_t)."""
    rewards, values, next_value, gamma, _ = case.args
    ret, returns = float(next_value), []
    for reward in reversed(rewards.double().tolist()):
        ret = reward + gamma * ret
        returns.append(ret)
    expected = torch.tensor(returns[::-1], dtype=torch.float64) - values.double()
    return compare(obs.value, expected, rtol=1e-4, atol=1e-4,
                    what=say("advantages with lambda=1 (return minus value)"))


def _gae_lambda_zero_cases() -> list[Case]:
    return [_gae_episode(221, 9, lam=0.0), _gae_episode(222, 5, sparse=True, lam=0.0)]


def _td_residuals(rewards, values, next_value, gamma) -> torch.Tensor:
    v_next = torch.cat([values.double()[1:], torch.tensor([float(next_value)], dtype=torch.float64)])
    return rewards.double() + gamma * v_next - values.double()


def _gae_lambda_zero_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    rewards, values, next_value, gamma, _ = case.args
    return compare(obs.value, _td_residuals(rewards, values, next_value, gamma), rtol=1e-4,
                    atol=1e-5, what=say("advantages with lambda=0 (the TD residuals)"))


def _gae_gamma_zero_cases() -> list[Case]:
    return [_gae_episode(231, 7, gamma=0.0, lam=0.95)]


def _gae_gamma_zero_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    rewards, values, *_ = case.args
    return compare(obs.value, rewards.double() - values.double(), rtol=1e-4, atol=1e-5,
                    what=say("advantages with gamma=0 (r_t - V(s_t))"))


def _gae_single_step_cases() -> list[Case]:
    return [_gae_episode(241, 1, note="T=1"), _gae_episode(242, 1, gamma=0.5, lam=0.3, note="T=1")]


def _gae_next_value_cases() -> list[Case]:
    # A rollout segment cut before its episode ends: the state after its last step has a value.
    return [_gae_episode(251, 6, sparse=True, next_value=2.5,
                         note=say("segment of {steps} steps cut before the episode ends, next_value={next_value}", steps=6, next_value=2.5)),
            _gae_episode(252, 1, next_value=-1.5, note=say("segment of 1 step cut before the episode ends, next_value={next_value}", next_value=-1.5)),
            _gae_episode(253, 10, next_value=4.0, note=say("segment of {steps} steps cut before the episode ends, next_value={next_value}", steps=10, next_value=4.0))]


def _gae_random_length_cases() -> list[Case]:
    gen = generator(261)
    lengths = torch.randint(2, 40, (5,), generator=gen).tolist()
    # A drawn length is a hidden input: the student reads the range it is drawn from, the instructor the length.
    drawn = say("an episode of random length, 2 to 39 steps")
    return [_gae_episode(262 + i, n, note=Finding(f"T={n}, gamma=0.99, lambda=0.95, next_value=0.0", drawn.public))
            for i, n in enumerate(lengths)]


def _gae_shape_cases() -> list[Case]:
    return [_gae_episode(271, 13)]


def _gae_shape_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    want = tuple(case.args[0].shape)
    if tuple(obs.value.shape) != want:
        return say("advantages have shape {shape}, expected {expected} (one per step)", shape=tuple(obs.value.shape), expected=want)
    if not obs.value.dtype.is_floating_point:
        return say("advantages have dtype {dtype}, expected a floating-point tensor", dtype=obs.value.dtype)
    return None


def _gae_unmodified_cases() -> list[Case]:
    return [_gae_episode(281, 8, next_value=1.0)]


def _gae_unmodified_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    return unmodified(case, obs, GAE_ARGS, recall)


# --------------------------------------------------------------------------------------
# The visible tests, as the trusted grader decides them.  Each mirrors its notebook cell,
# including that the cell reuses its input tensors across calls (so an in-place change to an
# input breaks the cell's next call, and fails it here too).
# --------------------------------------------------------------------------------------

GUIDE_RATIO = (0.5, 1.0, 1.5, 2.0, 3.0)


def _ppo_visible_cases() -> list[Case]:
    ratio = torch.tensor(GUIDE_RATIO)
    return [Case((ratio, torch.ones(5), 0.2), note=say("A = {advantage}, expected {expected}", advantage="+1", expected=1.02)),
            Case((ratio, -torch.ones(5), 0.2), note=say("A = {advantage}, expected {expected}", advantage="-1", expected=-1.66))]


def _ppo_visible_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    if obs.value.dim() != 0:
        return say("return a 0-d tensor: the mean over tokens")
    detail = compare(obs.value, ppo_reference(*case.args).mean(), rtol=0, atol=1e-4, what="objective")
    return detail or unmodified_only(case, obs, PPO_ARGS)


def _dpo_visible_cases() -> list[Case]:
    a, b, ref, zero = torch.tensor(-2.0), torch.tensor(-5.0), torch.tensor(-3.0), torch.tensor(0.0)
    return [Case((a, b, ref, ref, 0.1), note=say("policy prefers y_w, expected {expected}", expected=0.5544)),
            Case((b, a, ref, ref, 0.1), note=say("policy prefers y_l, expected {expected}", expected=0.8544)),
            Case((torch.tensor(-2000.0), zero, zero, zero, 0.1), grad_wrt=(0,),
                 note=say("wrong by h = -2000 in float32, expected 200 with a finite gradient"))]


def _dpo_visible_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    atol = 1e-3 if case.grad_wrt else 1e-4  # as the cell's asserts
    detail = compare(obs.value.reshape(()), dpo_reference(*case.args), rtol=0, atol=atol, what="loss")
    if detail is None and case.grad_wrt:
        grad = obs.grads.get(0)
        if grad is None or not bool(torch.isfinite(grad).all()):
            detail = say("the gradient must reach log_p_w and stay finite (use F.logsigmoid)")
    return detail or unmodified_only(case, obs, DPO_ARGS)


def _gae_visible_cases() -> list[Case]:
    return [Case((torch.tensor([0.0, 0.0, 0.0, 0.0, 10.0]), torch.ones(5), 0.0, 0.99, 0.95),
                 note=say("the guide's 5-step episode"))]


def _gae_visible_judge(case: Case, obs: Observation, recall: Recall) -> str | None:
    if tuple(obs.value.shape) != (5,):
        return say("one advantage per step")
    detail = compare(obs.value, gae_reference(*case.args), rtol=0, atol=1e-3, what="advantages")
    if detail is None and not bool((obs.value > 0).all()):
        detail = say("the terminal reward must reach every step")
    return detail


# --------------------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------------------

_PPO, _DPO, _GAE = "ppo_clipped_objective", "dpo_loss", "compute_gae"

_ALL = [
    Check("ppo_visible_tests", _PPO, "the visible PPO examples (1.02 and -1.66)",
          _ppo_visible_cases, _ppo_visible_judge, visible=True),
    Check("dpo_visible_tests", _DPO, "the visible DPO examples (0.5544, 0.8544, and 200 at a huge wrong margin)",
          _dpo_visible_cases, _dpo_visible_judge, visible=True),
    Check("gae_visible_tests", _GAE, "the visible GAE example",
          _gae_visible_cases, _gae_visible_judge, visible=True),
    # PPO
    Check("ppo_positive_advantage_caps_upside", _PPO,
          "for A > 0, a ratio above 1 + eps must be clipped to 1 + eps",
          lambda: _ppo_single_tokens(1, 1.35, 1e3, +1, 0.2, log_scale=True), _ppo_value_judge),
    Check("ppo_positive_advantage_keeps_downside", _PPO,
          "clipping must not apply to r < 1 - eps when A > 0 (the min keeps r * A)",
          lambda: _ppo_single_tokens(2, 1e-3, 0.7, +1, 0.2, log_scale=True), _ppo_value_judge),
    Check("ppo_negative_advantage_caps_downside", _PPO,
          "for A < 0, a ratio below 1 - eps must be clipped to 1 - eps",
          lambda: _ppo_single_tokens(3, 1e-3, 0.7, -1, 0.2, log_scale=True), _ppo_value_judge),
    Check("ppo_negative_advantage_keeps_upside", _PPO,
          "clipping must not apply to r > 1 + eps when A < 0 (the min keeps r * A)",
          lambda: _ppo_single_tokens(4, 1.35, 1e3, -1, 0.2, log_scale=True), _ppo_value_judge),
    Check("ppo_inside_trust_region", _PPO,
          "inside [1 - eps, 1 + eps] the objective is r * A for either sign of A",
          lambda: _ppo_single_tokens(5, 0.85, 1.15, +1, 0.2, count=3)
          + _ppo_single_tokens(6, 0.85, 1.15, -1, 0.2, count=3), _ppo_value_judge),
    Check("ppo_zero_advantage", _PPO,
          "with A = 0 the objective and its gradient are 0",
          _ppo_zero_advantage_cases, _ppo_zero_advantage_judge),
    Check("ppo_epsilon_extremes", _PPO,
          "eps = 0 clips to exactly 1 on the capped side; a huge eps never clips",
          _ppo_eps_cases, _ppo_value_judge),
    Check("ppo_mixed_batch", _PPO,
          "a batch of tokens with mixed-sign advantages gives the mean clipped objective",
          _ppo_mixed_cases, _ppo_value_judge),
    Check("ppo_mean_over_tokens", _PPO,
          "the objective is the MEAN over tokens (a 0-d tensor), not the sum",
          _ppo_reduction_cases, _ppo_reduction_judge),
    Check("ppo_broadcast_batch_time", _PPO,
          "ratio of shape (B, T) with advantage of shape (B, 1) must broadcast",
          _ppo_broadcast_cases, _ppo_broadcast_judge),
    Check("ppo_gradient", _PPO,
          "the gradient w.r.t. the ratio is A where r * A is the active term and 0 where clipped",
          _ppo_gradient_cases, _ppo_gradient_judge),
    Check("ppo_inputs_unmodified", _PPO,
          "ppo_clipped_objective must not modify its inputs",
          _ppo_unmodified_cases, _ppo_unmodified_judge),
    Check("ppo_float64", _PPO,
          "float64 inputs give a float64 result",
          _ppo_float64_cases, _ppo_float64_judge),
    # DPO
    Check("dpo_zero_margin_is_ln2", _DPO,
          "when the policy and reference agree (margin 0) the loss is ln 2 for any beta",
          _dpo_zero_margin_cases, _dpo_zero_margin_judge),
    Check("dpo_values", _DPO,
          "the loss is -log sigmoid(beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)))",
          _dpo_value_cases, _dpo_value_judge),
    Check("dpo_beta_scales_margin", _DPO,
          "beta multiplies the log-ratio margin inside the sigmoid",
          _dpo_beta_cases, _dpo_value_judge),
    Check("dpo_swap_identity", _DPO,
          "swapping chosen and rejected raises the loss by exactly beta * margin",
          _dpo_swap_cases, _dpo_swap_judge),
    Check("dpo_reference_shift_invariance", _DPO,
          "the loss depends on the policy only through log-ratios against the reference",
          _dpo_shift_cases, _dpo_shift_judge),
    Check("dpo_numerically_stable", _DPO,
          "float32 loss and gradient stay finite and exact for beta * margin = -200 and +50 "
          "(use F.logsigmoid, not log(sigmoid))",
          _dpo_stability_cases, _dpo_stability_judge),
    Check("dpo_gradient", _DPO,
          "the gradient is -beta * sigmoid(-beta * margin) on log_p_w and +beta * sigmoid(...) on log_p_l "
          "(the reference log-probs need none)",
          _dpo_gradient_cases, _dpo_gradient_judge),
    Check("dpo_per_pair_shape", _DPO,
          "dpo_loss returns one loss per pair, with the inputs' shape (0-d for 0-d inputs)",
          _dpo_shape_cases, _dpo_shape_judge),
    Check("dpo_inputs_unmodified", _DPO,
          "dpo_loss must not modify its inputs",
          _dpo_unmodified_cases, _dpo_unmodified_judge),
    # GAE
    Check("gae_values", _GAE,
          "advantages follow A_t = delta_t + gamma * lambda * A_{t+1}, computed from the last step back",
          _gae_value_cases, _gae_value_judge),
    Check("gae_lambda_one_is_monte_carlo", _GAE,
          "with lambda = 1 the advantage is the discounted return minus V(s_t)",
          _gae_lambda_one_cases, _gae_lambda_one_judge),
    Check("gae_lambda_zero_is_td_residual", _GAE,
          "with lambda = 0 the advantage is the one-step TD residual delta_t",
          _gae_lambda_zero_cases, _gae_lambda_zero_judge),
    Check("gae_gamma_zero", _GAE,
          "with gamma = 0 the advantage is r_t - V(s_t)",
          _gae_gamma_zero_cases, _gae_gamma_zero_judge),
    Check("gae_single_step", _GAE,
          "an episode of one step (T = 1) works",
          _gae_single_step_cases, _gae_value_judge),
    Check("gae_bootstraps_next_value", _GAE,
          "the last step bootstraps from next_value = V(s_T) when a rollout segment is cut before its "
          "episode ends (in RLHF a truncated response is scored by the reward model: next_value = 0)",
          _gae_next_value_cases, _gae_value_judge),
    Check("gae_random_lengths", _GAE,
          "episodes of random lengths give the right advantages",
          _gae_random_length_cases, _gae_value_judge),
    Check("gae_shape", _GAE,
          "compute_gae returns one advantage per step, with the rewards' shape",
          _gae_shape_cases, _gae_shape_judge),
    Check("gae_inputs_unmodified", _GAE,
          "compute_gae must not modify its inputs (do not write advantages into `rewards`)",
          _gae_unmodified_cases, _gae_unmodified_judge),
]

CHECKS: dict[str, Check] = by_id(_ALL)


def checks_for(function_name: str, *, hidden_only: bool = True) -> list[Check]:
    return [check for check in _ALL if check.function == function_name and not (hidden_only and check.visible)]


HIDDEN_CHECKS = {check.id: check for check in _ALL if not check.visible}
