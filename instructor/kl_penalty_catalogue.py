"""Wrong and correct answers to the KL-penalty exercise, each with what it must score.  INSTRUCTOR ONLY.

Used by tests/grading/test_kl_penalty_checks.py (in-process) and test_two_assignments.py (trusted
grading and stock nbgrader autograde): a wrong answer loses exactly ``loses``, a correct variant nothing."""
from __future__ import annotations

from rlhf_course.grading.catalogue import CorrectVariant, Misconception, WrongAnswer, by_name, said

KL_CELL = "kl_answer"


def _cell(body: str) -> str:
    return f'''def kl_estimator_k3(log_p, ref_log_p):
    """Per-token k3 estimate of KL(pi || pi_ref)."""
{body}'''


_SHAPED = {"kl_visible_tests", "kl_values", "kl_zero_when_equal_and_nonnegative", "kl_stable_when_close",
           "kl_gradient_and_shape"}

WRONG_ANSWERS: list[WrongAnswer] = [
    WrongAnswer("kl_naive_exp_minus_one", KL_CELL, _cell(
        "    d = ref_log_p - log_p\n    return torch.exp(d) - 1 - d  # exp(d) - 1 rounds away k3 when d is small\n"),
        frozenset({"kl_stable_when_close"})),
    WrongAnswer("kl_k1_instead_of_k3", KL_CELL, _cell("    return log_p - ref_log_p  # k1: unbiased but often negative\n"),
                frozenset({"kl_visible_tests", "kl_values", "kl_zero_when_equal_and_nonnegative",
                           "kl_stable_when_close", "kl_gradient_and_shape"})),
    WrongAnswer("kl_k2_instead_of_k3", KL_CELL, _cell("    return 0.5 * (ref_log_p - log_p) ** 2  # k2: biased\n"),
                frozenset({"kl_visible_tests", "kl_values", "kl_gradient_and_shape"})),
    WrongAnswer("kl_ratio_the_wrong_way", KL_CELL, _cell(
        "    d = log_p - ref_log_p  # log(pi / pi_ref): the ratio the wrong way round\n"
        "    return torch.expm1(d) - d\n"),
        frozenset({"kl_visible_tests", "kl_values", "kl_gradient_and_shape"})),
    WrongAnswer("kl_mean_over_tokens", KL_CELL, _cell(
        "    d = ref_log_p - log_p\n    return (torch.expm1(d) - d).mean()  # the penalty is per token\n"),
        frozenset(_SHAPED)),
    WrongAnswer("kl_detached", KL_CELL, _cell(
        "    d = (ref_log_p - log_p).detach()\n    return torch.expm1(d) - d\n"),
        frozenset({"kl_gradient_and_shape"})),
    WrongAnswer("kl_in_place", KL_CELL, _cell(
        "    d = ref_log_p.sub_(log_p)  # overwrites the caller's ref_log_p\n    return torch.expm1(d) - d\n"),
        frozenset({"kl_visible_tests", "kl_inputs_unmodified"})),
]
WRONG_BY_NAME = by_name(WRONG_ANSWERS)

# What each wrong answer gets wrong, for the student's feedback (rlhf_course/grading/misconceptions.py).  Two pairs
# lose the same cells (k1 / the mean over tokens; k2 / the ratio the wrong way round): the checks' details tell each
# pair apart.
_INTRO = {"en": "The KL penalty, one token at a time", "zh-CN": "KL 惩罚：逐个 token 计算"}
_FLOAT = {"en": "Computing $k_3$ in floating point", "zh-CN": "在浮点数中计算 $k_3$"}


MISCONCEPTIONS: dict[str, Misconception] = {
    "kl_naive_exp_minus_one": said(_FLOAT, (
        "exp(d) - 1 instead of expm1(d)",
        "Near the reference exp(d) is rounded to float32 before 1 is subtracted, an error of a few 1e-8 "
        "whatever d is, against k3 of about d^2 / 2: typically as large as k3 at |d| = 2e-4 (larger below) "
        "and still about 4 % of k3 at |d| = 1e-3, more than the 1 % that kl_stable_when_close allows on most "
        "of the tokens it draws (|d| from 1e-4 to 3e-3); torch.expm1(d) computes exp(d) - 1 without it."), (
        "用了 exp(d) - 1 而不是 expm1(d)",
        "在参考策略附近，exp(d) 先被舍入为 float32 再减去 1，无论 d 是多少都带来几个 1e-8 的误差，"
        "而 k3 只有约 d^2 / 2；在 |d| = 2e-4 处这个误差通常与 k3 一样大（|d| 更小时更大），"
        "在 |d| = 1e-3 处仍约为 k3 的 4%，"
        "超过 kl_stable_when_close 对其抽取的大多数 token（|d| 在 1e-4 与 3e-3 之间）所允许的 1%；"
        "torch.expm1(d) 计算 exp(d) - 1 时没有这个误差。")),
    "kl_k1_instead_of_k3": said(_INTRO, (
        "k1 instead of k3",
        "log_p - ref_log_p is the k1 estimator, unbiased but negative on many tokens; the penalty asks for "
        "k3 = (r - 1) - log r, never negative and exactly 0 where the policy and the reference agree."), (
        "用了 k1 而不是 k3",
        "log_p - ref_log_p 是 k1 估计量，无偏，但在许多 token 上为负；这里要求的是 k3 = (r - 1) - log r，"
        "它从不为负，并且在策略与参考策略一致的地方恰好为 0。")),
    "kl_k2_instead_of_k3": said(_INTRO, (
        "k2 instead of k3",
        "0.5 * d^2 is the k2 estimator, never negative but biased; k3 = (r - 1) - log r adds the zero-mean term "
        "r - 1 to -log r and stays unbiased."), (
        "用了 k2 而不是 k3",
        "0.5 * d^2 是 k2 估计量，从不为负，但有偏；k3 = (r - 1) - log r 在 -log r 上加了均值为零的 r - 1，仍然无偏。")),
    "kl_ratio_the_wrong_way": said(_INTRO, (
        "The ratio the wrong way round",
        "r is reference over policy, r = exp(ref_log_p - log_p); with d = log(pi / pi_ref) instead, expm1(d) "
        "- d is (1/r - 1) - log(1/r), whose mean over tokens drawn from pi is chi^2(pi || pi_ref) - KL(pi || "
        "pi_ref): neither KL (it would estimate KL(pi_ref || pi) only on tokens drawn from pi_ref)."), (
        "概率比的方向反了",
        "r 是参考策略与策略之比，r = exp(ref_log_p - log_p)；"
        "改用 d = log(pi / pi_ref) 后，"
        "expm1(d) - d 就成了 (1/r - 1) - log(1/r)，"
        "它在从 pi 采样的 token 上的均值是 chi^2(pi || pi_ref) - KL(pi || pi_ref)，"
        "它不是任何一个方向的 KL（只有在从 pi_ref 采样的 token 上，它才估计 KL(pi_ref || pi)）。")),
    "kl_mean_over_tokens": said(_INTRO, (
        "Reduced over the tokens",
        "The KL penalty is per token, one value for each token, subtracted from that token's reward; averaging "
        "(or summing) it over the tokens loses which token drifted."), (
        "对 token 做了归约",
        "KL 惩罚是逐个 token 的：每个 token 一个值，从该 token 的奖励中减去；对 token 取平均（或求和）就丢失了是哪个 token 偏离了参考策略。")),
    "kl_detached": said(_INTRO, (
        "Detached from the graph",
        "k3 must let a gradient reach log_p (1 - r per token, for a loss such as GRPO's); .detach() cuts the "
        "graph."), (
        "从计算图中分离了（detach）",
        "k3 必须让梯度传到 log_p（每个 token 上为 1 - r，用于 GRPO 这样的损失）；.detach() 切断了计算图。")),
    "kl_in_place": said(_INTRO, (
        "Changes ref_log_p in place",
        "ref_log_p.sub_(log_p) overwrites the caller's reference log-probs; ref_log_p - log_p makes a new tensor "
        "instead."), (
        "原地修改了 ref_log_p",
        "ref_log_p.sub_(log_p) 会覆盖调用者的参考对数概率；ref_log_p - log_p 则会得到一个新张量。")),
}

CORRECT_VARIANTS: list[CorrectVariant] = [
    CorrectVariant("kl_float64_then_cast", KL_CELL, _cell(
        "    d = (ref_log_p - log_p).double()\n    return (torch.exp(d) - 1 - d).to(log_p.dtype)\n")),
    CorrectVariant("kl_ratio_with_log1p", KL_CELL, _cell(
        "    r_minus_1 = torch.expm1(ref_log_p - log_p)\n    return r_minus_1 - torch.log1p(r_minus_1)\n")),
]
