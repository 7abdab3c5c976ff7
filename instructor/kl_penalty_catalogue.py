"""Wrong and correct answers to the KL-penalty exercise, each with what it must score.  INSTRUCTOR ONLY.

Used by tests/grading/test_kl_penalty_checks.py (in-process) and test_two_assignments.py (trusted
grading and stock nbgrader autograde): a wrong answer loses exactly ``loses``, a correct variant nothing."""
from __future__ import annotations

from answer_catalogue import CorrectVariant, WrongAnswer

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
        "    d = log_p - ref_log_p  # log(pi / pi_ref): the estimator of the other KL direction\n"
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
WRONG_BY_NAME = {wrong.name: wrong for wrong in WRONG_ANSWERS}

CORRECT_VARIANTS: list[CorrectVariant] = [
    CorrectVariant("kl_float64_then_cast", KL_CELL, _cell(
        "    d = (ref_log_p - log_p).double()\n    return (torch.exp(d) - 1 - d).to(log_p.dtype)\n")),
    CorrectVariant("kl_ratio_with_log1p", KL_CELL, _cell(
        "    r_minus_1 = torch.expm1(ref_log_p - log_p)\n    return r_minus_1 - torch.log1p(r_minus_1)\n")),
]
