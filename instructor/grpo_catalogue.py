"""Wrong and correct answers to the GRPO exercise, each with what it must score.  INSTRUCTOR ONLY.

The wrong answers are the ones students write: the population std, eps inside the square root, the
default eps written in instead of the argument, the batch's mean instead of each group's, RLOO's
leave-one-out baseline where the contract asks for the group mean, scaling when told not to, NaN for a
group of one.  A wrong answer loses exactly ``loses``,
a correct variant nothing (tests/grading/test_grpo_checks.py)."""
from __future__ import annotations

from rlhf_course.grading.catalogue import CorrectVariant, Misconception, WrongAnswer, by_name, said

GRPO_CELL = "grpo_answer"


def _cell(body: str) -> str:
    return f'''def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    """Group-relative advantages: rewards (P, G) -> advantages (P, G)."""
{body}'''


# The population std changes every scaled advantage's value, which the value checks judge, and nothing else: the
# checks of centring, eps's place, groups with no spread and the dtype accept either std.
_SCALED_VALUES = {"grpo_visible_tests", "grpo_values", "grpo_bessel_std"}

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
                   "grpo_per_group_mean", "grpo_degenerate_groups"})),
    WrongAnswer("grpo_leave_one_out", GRPO_CELL, _cell(
        "    group = rewards.shape[1]\n    if group < 2:\n        return torch.zeros_like(rewards)\n"
        "    others = (rewards.sum(dim=1, keepdim=True) - rewards) / (group - 1)  # RLOO's baseline\n"
        "    centred = rewards - others\n"
        "    if not scale_by_std:\n        return centred\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + eps)\n"),
        frozenset({"grpo_visible_tests", "grpo_values", "grpo_bessel_std", "grpo_eps_outside_sqrt", "grpo_unscaled"})),
    WrongAnswer("grpo_scales_when_told_not_to", GRPO_CELL, _cell(
        "    if rewards.shape[1] < 2:\n        return torch.zeros_like(rewards)\n"
        "    centred = rewards - rewards.mean(dim=1, keepdim=True)\n"
        "    return centred / (rewards.std(dim=1, keepdim=True) + eps)  # scale_by_std ignored\n"),
        frozenset({"grpo_visible_tests", "grpo_unscaled"})),
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
WRONG_BY_NAME = by_name(WRONG_ANSWERS)

# What each wrong answer gets wrong, for the student's feedback (rlhf_course/grading/misconceptions.py).  One pair
# loses the same cell (eps inside the root / eps ignored): the check's details tell them apart.
_BASELINE = {"en": "Why a group baseline needs no value head", "zh-CN": "为什么组基线不需要价值头"}
_SCALING = {"en": "Dividing by the group's spread, and where $\\epsilon$ sits", "zh-CN": "除以组内的离散度，以及 $\\epsilon$ 加在哪里"}
_CONTRACT = {"en": "Your task: `group_relative_advantages`", "zh-CN": "你的任务：`group_relative_advantages`"}


MISCONCEPTIONS: dict[str, Misconception] = {
    "grpo_population_std": said(_SCALING, (
        "Population std instead of torch.std's",
        "The contract's std is Bessel-corrected (it divides by G - 1), as torch.std computes it and TRL's "
        "GRPOTrainer uses; unbiased=False divides by G and makes every scaled advantage too large."), (
        "用了总体标准差，而不是 torch.std 的标准差",
        "约定中的标准差经过贝塞尔校正（除以 G - 1），与 torch.std 的默认算法和 TRL 的 GRPOTrainer 一致；"
        "unbiased=False 除以 G，会让每个缩放后的优势都偏大。")),
    "grpo_eps_inside_sqrt": said(_SCALING, (
        "eps inside the square root",
        "eps is added to the std, outside the square root: sqrt(var + eps) and std + eps differ most when a "
        "group's rewards are close together, exactly where eps matters."), (
        "把 eps 放进了平方根",
        "eps 要加在标准差上，在平方根之外：组内奖励彼此很接近时，sqrt(var + eps) 与 std + eps 相差最大，而那正是 eps 起作用的地方。")),
    "grpo_eps_hard_coded": said(_CONTRACT, (
        "eps ignored",
        "Writing 1e-4 instead of using the eps argument is right only for the default; the argument must reach "
        "the denominator."), (
        "忽略了 eps 参数",
        "把 1e-4 写死而不用参数 eps，只在默认值下才对；参数必须用到分母里。")),
    "grpo_batch_mean": said(_BASELINE, (
        "The batch's mean instead of each group's",
        "Each response is compared with the other responses to the same prompt: the baseline is its own group's "
        "mean (dim 1), not one mean over every prompt, which would favour every response to an easy prompt."), (
        "用了整个批次的均值，而不是各组自己的均值",
        "每个回答要与同一提示的其他回答比较：基线是它所在组的均值（dim 1），而不是所有提示共用的一个均值，"
        "否则简单提示的每个回答都会被偏爱。")),
    "grpo_leave_one_out": said(_BASELINE, (
        "Leave-one-out baseline (RLOO)",
        "The contract's baseline is the group mean with the response itself included; RLOO's mean of the other "
        "responses multiplies every centred reward by G / (G - 1), another estimator."), (
        "用了留一基线（RLOO）",
        "约定中的基线是包含该回答本身的组均值；RLOO 用其他回答的均值，相当于把每个中心化后的奖励乘以 G / (G - 1)，是另一个估计量。")),
    "grpo_scales_when_told_not_to": said(_SCALING, (
        "Scales when told not to",
        "With scale_by_std=False the advantages are r - group mean, unscaled (Dr. GRPO); dividing by the std "
        "anyway ignores the argument."), (
        "不该缩放时也缩放了",
        "scale_by_std=False 时，优势就是 r - 组均值，不缩放（Dr. GRPO）；照样除以标准差就忽略了这个参数。")),
    "grpo_nan_for_one_response": said(_CONTRACT, (
        "NaN for a group of one",
        "The std of a single reward is undefined (torch.std gives NaN), so a group of one response must give 0 "
        "explicitly: with nothing to compare it with, its advantage is 0."), (
        "只有一个回答的组得到了 NaN",
        "单个奖励的标准差没有定义（torch.std 返回 NaN），所以只有一个回答的组必须明确返回 0：没有可比较的回答，它的优势就是 0。")),
    "grpo_in_place": said(_CONTRACT, (
        "Changes the rewards in place",
        "rewards -= ... overwrites the caller's tensor, whose rewards the trainer still needs; rewards - mean "
        "makes a new tensor instead."), (
        "原地修改了 rewards",
        "rewards -= ... 会覆盖调用者的张量，而训练循环还要用这些奖励；rewards - mean 则会得到一个新张量。")),
}

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
