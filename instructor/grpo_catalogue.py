"""Wrong and correct answers to the GRPO exercise, each with what it must score.  INSTRUCTOR ONLY.

The wrong answers are the ones students write: the population std, eps inside the square root, the
default eps written in instead of the argument, the batch's mean instead of each group's, RLOO's
leave-one-out baseline where the contract asks for the group mean, scaling when told not to, NaN for a
group of one.  A wrong answer loses exactly ``loses``,
a correct variant nothing (tests/grading/test_grpo_checks.py)."""
from __future__ import annotations

from answer_catalogue import CorrectVariant, WrongAnswer

GRPO_CELL = "grpo_answer"


def _cell(body: str) -> str:
    return f'''def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    """Group-relative advantages: rewards (P, G) -> advantages (P, G)."""
{body}'''


_SCALED_VALUES = {"grpo_visible_tests", "grpo_values", "grpo_bessel_std", "grpo_eps_outside_sqrt",
                  "grpo_per_group_mean", "grpo_degenerate_groups", "grpo_dtype_and_float64"}

WRONG_ANSWERS: list[WrongAnswer] = [
    WrongAnswer("grpo_population_std", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)  # divides by G\n"),
        frozenset(_SCALED_VALUES)),
    WrongAnswer("grpo_eps_inside_sqrt", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / torch.sqrt(rewards.var(dim=1, keepdim=True) + eps)\n"),
        frozenset({"grpo_eps_outside_sqrt"})),
    WrongAnswer("grpo_eps_hard_coded", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + 1e-4)  # the default written in, eps ignored\n"),
        frozenset({"grpo_eps_outside_sqrt"})),
    WrongAnswer("grpo_batch_mean", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean()  # one baseline for every prompt\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std() + eps)\n"),
        frozenset({"grpo_visible_tests", "grpo_values", "grpo_bessel_std", "grpo_eps_outside_sqrt", "grpo_unscaled",
                   "grpo_per_group_mean", "grpo_degenerate_groups", "grpo_dtype_and_float64"})),
    WrongAnswer("grpo_leave_one_out", GRPO_CELL, _cell(
        "    group = rewards.shape[1]\n    if group < 2:\n        return torch.zeros_like(rewards)\n"
        "    others = (rewards.sum(dim=1, keepdim=True) - rewards) / (group - 1)  # RLOO's baseline\n"
        "    centred = rewards - others\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + eps)\n"),
        frozenset({"grpo_visible_tests", "grpo_values", "grpo_bessel_std", "grpo_eps_outside_sqrt", "grpo_unscaled",
                   "grpo_per_group_mean", "grpo_degenerate_groups", "grpo_dtype_and_float64"})),
    WrongAnswer("grpo_scales_when_told_not_to", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + eps)  # scale_by_std ignored\n"),
        frozenset({"grpo_visible_tests", "grpo_unscaled", "grpo_per_group_mean", "grpo_dtype_and_float64"})),
    WrongAnswer("grpo_nan_for_one_response", GRPO_CELL, _cell(
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + eps)  # std of one value is NaN\n"),
        frozenset({"grpo_degenerate_groups"})),
    WrongAnswer("grpo_in_place", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    std = rewards.std(dim=1, keepdim=True)\n"
        "    rewards -= rewards.mean(dim=1, keepdim=True)  # overwrites the caller's rewards\n"
        "    return rewards / (std + eps) if scale_by_std else rewards\n"),
        frozenset({"grpo_visible_tests", "grpo_inputs_unmodified"})),
]
WRONG_BY_NAME = {wrong.name: wrong for wrong in WRONG_ANSWERS}

CORRECT_VARIANTS: list[CorrectVariant] = [
    CorrectVariant("grpo_std_mean_and_where", GRPO_CELL, _cell(
        "    std, mean = torch.std_mean(rewards, dim=1, keepdim=True)\n"
        "    centred = rewards - mean\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return torch.where(torch.isnan(std), torch.zeros_like(centred), centred / (std + eps))\n")),
    CorrectVariant("grpo_explicit_bessel", GRPO_CELL, _cell(
        "    group = rewards.shape[1]\n"
        "    centred = rewards - rewards.sum(dim=1, keepdim=True) / group\n"
        "    if not scale_by_std or group == 1:\n        return centred\n"
        "    std = (centred.pow(2).sum(dim=1, keepdim=True) / (group - 1)).sqrt()\n"
        "    return centred / (std + eps)\n")),
    CorrectVariant("grpo_nan_to_num", GRPO_CELL, _cell(
        "    centred = rewards - rewards.mean(1, keepdim=True)\n"
        "    if scale_by_std:\n        centred = centred / (rewards.std(1, keepdim=True) + eps)\n"
        "    return torch.nan_to_num(centred, nan=0.0)  # a group of one: 0 / NaN\n")),
]
