"""Realistic wrong answers and example submissions.  INSTRUCTOR ONLY: never released.

Each wrong answer replaces ONE of the three answer cells (keyed by its nbgrader grade_id) and
lists the grade cells it must lose.  The test suite grades every entry, in-process and through
a real nbgrader round trip, and requires the lost cells to be exactly these: a mistake costs
the points of the property it breaks, and nothing else.

Answer cells not named by an entry keep the instructor's reference solution.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WrongAnswer:
    name: str
    answer_cell: str  # grade_id of the answer cell it replaces
    source: str       # the whole cell, as a student would write it
    loses: frozenset[str]  # grade_ids of the grade cells that must score 0


PPO_CELL, DPO_CELL, GAE_CELL = "ppo_answer", "dpo_answer", "gae_answer"

_PPO_VALUE_CHECKS = {"ppo_visible_tests", "ppo_positive_advantage_caps_upside",
                     "ppo_positive_advantage_keeps_downside", "ppo_negative_advantage_caps_downside",
                     "ppo_negative_advantage_keeps_upside", "ppo_mixed_batch", "ppo_float64"}

WRONG_ANSWERS: list[WrongAnswer] = [
    WrongAnswer(
        "ppo_max_instead_of_min", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.max(surr1, surr2).mean()
''', frozenset(_PPO_VALUE_CHECKS | {"ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        "ppo_no_clipping", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    return (ratio * advantage).mean()
''', frozenset({"ppo_visible_tests", "ppo_positive_advantage_caps_upside",
                "ppo_negative_advantage_caps_downside", "ppo_mixed_batch", "ppo_float64",
                "ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        # The exercise guide's slip: clamp the ratio and forget the min (its 1.22).
        "ppo_clip_without_min", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    clipped_ratio = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return (clipped_ratio * advantage).mean()
''', frozenset({"ppo_visible_tests", "ppo_positive_advantage_keeps_downside",
                "ppo_negative_advantage_keeps_upside", "ppo_mixed_batch", "ppo_float64",
                "ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        "ppo_sum_instead_of_mean", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).sum()
''', frozenset({"ppo_visible_tests", "ppo_mixed_batch", "ppo_float64", "ppo_mean_over_tokens"})),
    WrongAnswer(
        # Goes through numpy, so no gradient reaches the ratio.
        "ppo_detached_numpy", PPO_CELL, '''
import numpy as np

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    r = ratio.detach().numpy()
    a = np.broadcast_to(advantage.detach().numpy(), r.shape)
    objective = np.minimum(r * a, np.clip(r, 1 - clip_epsilon, 1 + clip_epsilon) * a)
    return torch.tensor(objective.mean(), dtype=ratio.dtype)
''', frozenset({"ppo_zero_advantage", "ppo_gradient"})),
    WrongAnswer(
        "ppo_clamps_ratio_in_place", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = ratio.clamp_(1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_visible_tests", "ppo_inputs_unmodified", "ppo_gradient", "ppo_zero_advantage"})),
    WrongAnswer(
        "dpo_missing_beta", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return -F.logsigmoid(margin)
''', frozenset({"dpo_visible_tests", "dpo_values", "dpo_beta_scales_margin", "dpo_swap_identity",
                "dpo_numerically_stable", "dpo_gradient"})),
    WrongAnswer(
        "dpo_naive_log_sigmoid", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    diff = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return -torch.log(torch.sigmoid(diff))
''', frozenset({"dpo_numerically_stable"})),
    WrongAnswer(
        "dpo_mean_over_pairs", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    diff = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return -F.logsigmoid(diff).mean()
''', frozenset({"dpo_zero_margin_is_ln2", "dpo_values", "dpo_beta_scales_margin",
                "dpo_swap_identity", "dpo_gradient", "dpo_per_pair_shape"})),
    WrongAnswer(
        "dpo_ignores_reference", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return -F.logsigmoid(beta * (log_p_w - log_p_l))
''', frozenset({"dpo_values", "dpo_beta_scales_margin", "dpo_swap_identity",
                "dpo_reference_shift_invariance", "dpo_gradient"})),
    WrongAnswer(
        "gae_forward_recursion", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in range(T):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_visible_tests", "gae_values", "gae_lambda_one_is_monte_carlo",
                "gae_bootstraps_next_value", "gae_random_lengths"})),
    WrongAnswer(
        "gae_ignores_next_value", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = 0.0 if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_bootstraps_next_value"})),
    WrongAnswer(
        "gae_forgets_lambda", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_visible_tests", "gae_values", "gae_lambda_zero_is_td_residual",
                "gae_bootstraps_next_value", "gae_random_lengths"})),
    WrongAnswer(
        # Writes the advantages into the caller's rewards tensor.
        "gae_overwrites_rewards", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = rewards
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_inputs_unmodified"})),
]

WRONG_BY_NAME = {wrong.name: wrong for wrong in WRONG_ANSWERS}

# The example class that `make demo` grades: student id -> wrong answers it contains
# (None: the untouched release, every answer cell still raising NotImplementedError).
EXAMPLE_SUBMISSIONS: dict[str, tuple[str, ...] | None] = {
    "ada_correct": (),
    "ben_partly_wrong": ("ppo_clip_without_min", "dpo_naive_log_sigmoid"),
    "cleo_empty": None,
}
