"""GRPO on the tiny LM: several responses per prompt, each judged against its own group; no value head.

The trainer takes the student's three functions as arguments (a :class:`GrpoFunctions`): the group
advantages, the PPO clipped objective and the k3 KL estimator.  Nothing here implements any of them.

One iteration, for P prompts and G responses each (DeepSeekMath's GRPO, with the same reward model
and SFT reference as the PPO lab):

* sample G responses per prompt from the current policy (``pi_old``); score each with the reward
  model: rewards of shape (P, G);
* advantages (P, G) from the student's ``group_relative_advantages``; each response's advantage is
  broadcast over its tokens as a (P*G, 1) column, which the student's ``ppo_clipped_objective``
  already accepts;
* a few epochs of gradient ascent on ``L^CLIP - kl_coef * mean k3``: the KL to the reference is a
  term of the loss, estimated by the student's ``kl_estimator_k3`` on the sampled tokens, not a
  per-token penalty folded into the reward as in the PPO lab.

Every response has the same length here, so the mean over all tokens equals GRPO's per-sequence
mean followed by the mean over the group: the length bias Dr. GRPO removes cannot show on this
language.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from typing import Callable

import torch

from rlhf_course.lab import language
from rlhf_course.lab.language import RESPONSE_LENGTH, gold_reward
from rlhf_course.lab.model import PolicyLM, RewardModel, response_stats
from rlhf_course.lab.student import guard
from rlhf_course.lab.train import _examples, _progress, frozen_copy


@dataclass(frozen=True)
class GrpoConfig:
    iterations: int = 40
    prompts: int = 8          # P: prompts per iteration
    group_size: int = 8       # G: responses per prompt (P * G = 64, the PPO lab's batch)
    epochs: int = 4
    lr: float = 1e-3
    kl_coef: float = 0.2      # weight of the k3 term in the loss (GRPO's beta): at 0.2 the quick run ends near the PPO lab's KL
    clip_epsilon: float = 0.2
    scale_by_std: bool = True  # False: Dr. GRPO's unscaled advantages
    eps: float = 1e-4

    @classmethod
    def setting(cls, name: str, **overrides) -> "GrpoConfig":
        presets = {"quick": {}, "full": dict(iterations=100, prompts=16), "smoke": dict(iterations=2, prompts=2,
                                                                                      group_size=4, epochs=1)}
        if name not in presets:
            raise ValueError(f"unknown setting {name!r}; choose one of {sorted(presets)}")
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown GRPO settings: {sorted(unknown)}")
        return cls(**{**presets[name], **overrides})


@dataclass(frozen=True)
class GrpoFunctions:
    """The three student functions GRPO trains with, each checked on every call."""

    group_relative_advantages: Callable
    ppo_clipped_objective: Callable
    kl_estimator_k3: Callable

    @classmethod
    def wrap(cls, group_relative_advantages: Callable, ppo_clipped_objective: Callable,
             kl_estimator_k3: Callable) -> "GrpoFunctions":
        return cls(
            guard(group_relative_advantages, "group_relative_advantages",
                  lambda rewards, *a, **k: tuple(rewards.shape), needs_grad=False),
            guard(ppo_clipped_objective, "ppo_clipped_objective", lambda *a, **k: (), needs_grad=True),
            guard(kl_estimator_k3, "kl_estimator_k3", lambda log_p, *a, **k: tuple(log_p.shape), needs_grad=True),
        )


def grpo_train(sft_policy: PolicyLM, reward_model: RewardModel, student: GrpoFunctions, config: GrpoConfig,
               generator: torch.Generator, show_progress: bool = True
               ) -> tuple[PolicyLM, list[dict[str, float]], dict]:
    """GRPO against the reward model from the SFT policy, which is also the KL reference.

    Returns the trained policy, one metrics row per iteration (on that iteration's own samples, the
    same keys as the PPO lab's history plus the advantages' spread), and a few sampled responses at
    the start and at the end.
    """
    reference = frozen_copy(sft_policy)
    policy = copy.deepcopy(sft_policy).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.lr)
    history, first_samples = [], None
    for iteration in _progress(range(config.iterations), "GRPO", show_progress):
        prompts = language.sample_prompts(config.prompts, generator).repeat_interleave(config.group_size, 0)
        with torch.no_grad():
            responses = policy.sample(prompts, RESPONSE_LENGTH, generator)
            old_log_probs, entropy, _ = response_stats(policy, prompts, responses)
            ref_log_probs, _, _ = response_stats(reference, prompts, responses)
            score = reward_model(torch.cat([prompts, responses], 1))
            advantages = student.group_relative_advantages(score.view(config.prompts, config.group_size),
                                                           config.scale_by_std, config.eps)
            column = advantages.reshape(-1, 1)  # one advantage per response, broadcast over its tokens
        for _ in range(config.epochs):
            log_probs, _, _ = response_stats(policy, prompts, responses)
            ratio = torch.exp(log_probs - old_log_probs)
            objective = student.ppo_clipped_objective(ratio, column, config.clip_epsilon)
            kl_term = student.kl_estimator_k3(log_probs, ref_log_probs).mean()
            loss = -(objective - config.kl_coef * kl_term)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            optimizer.step()
        history.append({
            "iteration": iteration,
            "reward_model_score": score.mean().item(),
            "gold_reward": gold_reward(responses).mean().item(),
            "kl_to_reference": (old_log_probs - ref_log_probs).sum(1).mean().item(),
            "entropy_per_token": entropy.mean().item(),
            "reward_spread_within_groups": score.view(config.prompts, config.group_size).std(1).mean().item(),
            "advantage_abs_mean": advantages.abs().mean().item(),
        })
        if first_samples is None:
            first_samples = _examples(prompts, responses, reward_model)
    policy.eval()
    return policy, history, {"before": first_samples, "after": _examples(prompts, responses, reward_model)}
