"""What the misconception explanations (instructor/*_catalogue.py) and the DPO explorer's prose state, measured: each
direction or magnitude a student reads after a mistake is computed here on the catalogued answer itself, and the
numbers the sentences quote are the measured ones, in English and in Chinese."""
from __future__ import annotations

import math

import pytest
import torch

from rlhf_course.floating_point import k3_rounding_errors, literal_k3
from rlhf_course.course import notebooks
from rlhf_course.grading.instructor import load_module as load_instructor_module
from tests.support import answers
from tests.support.course import REPO, repo_course

KL_CATALOGUE = load_instructor_module(repo_course(), "kl_penalty_catalogue")
KL_CHECKS = load_instructor_module(repo_course(), "kl_penalty_hidden_checks")
RLHF_CATALOGUE = load_instructor_module(repo_course(), "rlhf_catalogue")
GRPO_CATALOGUE = load_instructor_module(repo_course(), "grpo_catalogue")
GRPO_CHECKS = load_instructor_module(repo_course(), "grpo_hidden_checks")


def explanation(catalogue, name: str, language: str) -> str:
    return catalogue.MISCONCEPTIONS[name].explanation[language]


def flat(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------- the KL ratio the wrong way round

NEAR = ([0.40, 0.25, 0.15, 0.15, 0.05], [0.2] * 5)
FAR = ([0.99, 0.01], [0.01, 0.99])


def exact_means(pi: list[float], pi_ref: list[float]) -> dict[str, float]:
    """The catalogued answer's per-token value on every token of the vocabulary, averaged exactly (no sampling) over
    tokens drawn from pi and from pi_ref; the two KLs and chi^2(pi || pi_ref)."""
    estimator = answers.function_from(KL_CATALOGUE.WRONG_BY_NAME["kl_ratio_the_wrong_way"].source, "kl_estimator_k3")
    pi, pi_ref = torch.tensor(pi, dtype=torch.float64), torch.tensor(pi_ref, dtype=torch.float64)
    per_token = estimator(pi.log(), pi_ref.log())
    return {"mean_on_pi": float((pi * per_token).sum()), "mean_on_pi_ref": float((pi_ref * per_token).sum()),
            "kl_pi_ref": float((pi * (pi / pi_ref).log()).sum()), "kl_ref_pi": float((pi_ref * (pi_ref / pi).log()).sum()),
            "chi2": float((pi ** 2 / pi_ref).sum() - 1)}


def test_the_ratio_the_wrong_way_round_estimates_neither_kl():
    near, far = exact_means(*NEAR), exact_means(*FAR)
    assert [round(near[k], 4) for k in ("mean_on_pi", "kl_pi_ref", "kl_ref_pi")] == [0.1726, 0.1774, 0.2091]
    assert [round(far[k], 2) for k in ("mean_on_pi", "kl_pi_ref", "kl_ref_pi")] == [92.51, 4.50, 4.50]
    for m in (near, far):
        assert m["mean_on_pi"] == pytest.approx(m["chi2"] - m["kl_pi_ref"], rel=1e-12)  # chi^2 - KL(pi || pi_ref)
        assert abs(m["mean_on_pi"] - m["kl_pi_ref"]) > 0.02 * m["kl_pi_ref"]  # neither KL
        assert abs(m["mean_on_pi"] - m["kl_ref_pi"]) > 0.1 * m["kl_ref_pi"]
        assert m["mean_on_pi_ref"] == pytest.approx(m["kl_ref_pi"], rel=1e-12)  # KL(pi_ref || pi) only on pi_ref's tokens
    english = flat(explanation(KL_CATALOGUE, "kl_ratio_the_wrong_way", "en"))
    assert "chi^2(pi || pi_ref) - KL(pi || pi_ref): neither KL" in english
    assert "estimate KL(pi_ref || pi) only on tokens drawn from pi_ref" in english
    chinese = explanation(KL_CATALOGUE, "kl_ratio_the_wrong_way", "zh-CN")
    assert "chi^2(pi || pi_ref) - KL(pi || pi_ref)" in chinese and "只有在从 pi_ref 采样的 token 上" in chinese
    assert "另一个方向的 KL" not in chinese and "other direction" not in english


# ----------------------------------------------------------------------------- exp(d) - 1 in float32

def test_the_literal_forms_rounding_error_against_k3_where_the_check_draws():
    """Typically as large as k3 at |d| = 2e-4 (larger below), about 4 % of it at 1e-3; on the tokens
    kl_stable_when_close draws, over its 1 % on most of them (and larger than k3 on few)."""
    rows = k3_rounding_errors(literal_k3, [1e-4, 2e-4, 1e-3])
    assert [round(row.median, 2) for row in rows] == [3.96, 0.99, 0.04]
    naive = answers.function_from(KL_CATALOGUE.WRONG_BY_NAME["kl_naive_exp_minus_one"].source, "kl_estimator_k3")
    (case,) = KL_CHECKS._close_cases()
    exact = KL_CHECKS.kl_reference(*case.args)
    relative = (naive(*case.args).double() - exact).abs() / exact
    sizes = (case.args[1].double() - case.args[0].double()).abs()
    assert sizes.min() >= 1e-4 and sizes.max() <= 3e-3
    assert int((relative > 0.01).sum()) == 52 and relative.numel() == 64  # most: over the check's rtol
    assert int((relative >= 1).sum()) == 15  # few: at least k3 itself
    error = relative * exact  # "a few 1e-8 whatever d is": the rounding of exp(d) near 1
    assert 1e-8 < float(error.median()) < 3e-8 and float(error.max()) < 6e-8
    english = flat(explanation(KL_CATALOGUE, "kl_naive_exp_minus_one", "en"))
    assert "as large as k3 at |d| = 2e-4 (larger below)" in english and "about 4 % of k3 at |d| = 1e-3" in english
    assert "more than the 1 % that kl_stable_when_close allows on most of the tokens" in english
    chinese = explanation(KL_CATALOGUE, "kl_naive_exp_minus_one", "zh-CN")
    assert "|d| = 2e-4" in chinese and "4%" in chinese and "1%" in chinese


# ----------------------------------------------------------------------------- DPO: beta left out, and beta's push

def margin_after_sgd(loss, beta: float | None, steps: int) -> float:
    """One pair's log-ratio margin h, trained directly by SGD at learning rate 1 from h = 0 on ``loss`` (a dpo_loss);
    ``beta`` None: the loss's own (the catalogued answer ignores it)."""
    h = torch.zeros((), dtype=torch.float64, requires_grad=True)
    zero = torch.zeros((), dtype=torch.float64)
    kwargs = {} if beta is None else {"beta": beta}
    for _ in range(steps):
        (grad,) = torch.autograd.grad(loss(h, zero, zero, zero, **kwargs), h)
        with torch.no_grad():
            h -= grad
    return h.item()


def dpo_function(source: str):
    return answers.function_from(source, "dpo_loss")


def reference_dpo():
    source = notebooks.solution_answers(notebooks.read(REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"))["dpo_answer"]
    return dpo_function(source)


def test_beta_left_out_pushes_harder_only_at_first():
    missing = dpo_function(RLHF_CATALOGUE.WRONG_BY_NAME["dpo_missing_beta"].source)
    reference = reference_dpo()
    at_zero = []
    for loss in (missing, reference):
        h = torch.zeros((), dtype=torch.float64, requires_grad=True)
        zero = torch.zeros((), dtype=torch.float64)
        at_zero.append(-float(torch.autograd.grad(loss(h, zero, zero, zero), h)[0]))
    assert at_zero == pytest.approx([0.5, 0.05])
    after = {steps: (margin_after_sgd(missing, None, steps), margin_after_sgd(reference, 0.1, steps)) for steps in (10, 1000)}
    assert [round(v, 2) for v in after[10]] == [2.26, 0.49]  # beta left out: further at first
    assert [round(v, 2) for v in after[1000]] == [6.91, 21.78]  # then much closer to the reference
    english = flat(explanation(RLHF_CATALOGUE, "dpo_missing_beta", "en"))
    assert "0.5 at margin 0, against 0.05 at beta = 0.1" in english
    assert "2.26 against 0.49 after 10 steps, 6.91 against 21.78 after 1000" in english
    chinese = explanation(RLHF_CATALOGUE, "dpo_missing_beta", "zh-CN")
    assert "10 步后漏掉 beta 时为 2.26，beta = 0.1 时为 0.49；1000 步后分别为 6.91 和 21.78" in chinese
    assert "0.5" in chinese and "0.05" in chinese
    assert "far harder" not in english


def test_the_dpo_explorers_finite_training_statement():
    """Early on a larger beta pushes harder; after long training it leaves the policy closer to the reference."""
    reference = reference_dpo()
    early = [round(margin_after_sgd(reference, beta, 10), 2) for beta in (0.1, 0.5, 2.0)]
    late = [round(margin_after_sgd(reference, beta, 1000), 2) for beta in (0.1, 0.5, 2.0)]
    assert early == [0.49, 1.92, 1.91] and early[0] < early[1]
    assert late == [21.78, 11.01, 4.15] and late == sorted(late, reverse=True)
    cell = next(c for c in notebooks.read(REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb").cells
                if c.id == "dpo-explorer-intro")
    text = flat(cell.source)
    assert "$h$ = 0.49, 1.92 and 1.91 after 10 steps" in text and "$h$ = 21.78, 11.01 and 4.15" in text
    chinese = next(c for c in notebooks.read(REPO / "source" / "rlhf_zh" / "rlhf_building_blocks.ipynb").cells
                   if c.id == "dpo-explorer-intro").source
    assert "0.49、1.92、1.91" in chinese and "21.78、11.01、4.15" in chinese


# ----------------------------------------------------------------------------- an unstable log-sigmoid

def test_both_unstable_log_sigmoids_lose_finiteness_in_float32():
    x = torch.tensor(-200.0)
    assert torch.sigmoid(x).item() == 0.0 and torch.log(torch.sigmoid(x)).item() == -math.inf  # underflow
    assert torch.exp(-x).item() == math.inf and torch.log1p(torch.exp(-x)).item() == math.inf  # overflow
    assert torch.nn.functional.logsigmoid(x).item() == pytest.approx(-200.0)
    english = flat(explanation(RLHF_CATALOGUE, "dpo_naive_log_sigmoid", "en"))
    assert "log(sigmoid(x)) underflows" in english and "log1p(exp(-x)) overflows" in english


# ----------------------------------------------------------------------------- GRPO: the population std

def test_the_population_std_makes_every_scaled_advantage_larger():
    population = answers.function_from(GRPO_CATALOGUE.WRONG_BY_NAME["grpo_population_std"].source,
                                       "group_relative_advantages")
    rewards = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    contract = GRPO_CHECKS.advantages_reference(rewards)
    assert (population(rewards).abs() > contract.abs()).all()
    assert "makes every scaled advantage too large" in explanation(GRPO_CATALOGUE, "grpo_population_std", "en")


# ----------------------------------------------------------------------------- beta outside the log-sigmoid

def test_beta_outside_the_log_sigmoid_scales_the_loss_not_the_margin():
    outside = dpo_function(RLHF_CATALOGUE.WRONG_BY_NAME["dpo_beta_outside_the_sigmoid"].source)
    at_beta_one = reference_dpo()
    margins = torch.linspace(-30.0, 30.0, 13, dtype=torch.float64)
    zero = torch.zeros_like(margins)
    for beta in (0.05, 0.1, 0.5):
        h = margins.clone().requires_grad_(True)
        loss = outside(h, zero, zero, zero, beta=beta)
        assert torch.allclose(loss, beta * at_beta_one(margins, zero, zero, zero, beta=1.0))  # DPO's at beta = 1, scaled
        at_zero = outside(torch.zeros((), dtype=torch.float64), *(torch.zeros((), dtype=torch.float64),) * 3, beta=beta)
        assert at_zero.item() == pytest.approx(beta * math.log(2))  # not ln 2
        (grad,) = torch.autograd.grad(loss.sum(), h)
        assert torch.allclose(grad / -beta, torch.sigmoid(-margins))  # the weight sigmoid(-h): beta nowhere in it
    english = flat(explanation(RLHF_CATALOGUE, "dpo_beta_outside_the_sigmoid", "en"))
    assert "at margin 0 the loss is beta * ln 2 instead of ln 2" in english
    assert "the gradient weight sigmoid(-h) no longer depends on beta" in english
    chinese = explanation(RLHF_CATALOGUE, "dpo_beta_outside_the_sigmoid", "zh-CN")
    assert "DPO 损失整体缩放" in chinese and "边际为 0 时损失是 beta * ln 2 而不是 ln 2" in chinese and "梯度权重 sigmoid(-h) 也不再依赖于 beta" in chinese


# ----------------------------------------------------------------------------- GAE: the guide's values[-1]

def reference_gae():
    source = notebooks.solution_answers(notebooks.read(REPO / "source" / "rlhf" / "rlhf_building_blocks.ipynb"))["gae_answer"]
    return answers.function_from(source, "compute_gae")


def test_bootstrapping_from_values_last_adds_gamma_times_it_to_the_last_residual():
    guide = answers.function_from(RLHF_CATALOGUE.WRONG_BY_NAME["gae_bootstraps_from_last_value"].source, "compute_gae")
    generator = torch.Generator().manual_seed(5)
    rewards = torch.randn(7, dtype=torch.float64, generator=generator)
    values = torch.randn(7, dtype=torch.float64, generator=generator)
    gamma, lam = 0.99, 0.95
    ended = [guide(rewards, values, next_value=0.0, gamma=gamma, gae_lambda=lam),
             guide(rewards, values, next_value=2.5, gamma=gamma, gae_lambda=lam)]
    assert torch.equal(ended[0], ended[1])  # next_value is never read
    right = reference_gae()(rewards, values, next_value=0.0, gamma=gamma, gae_lambda=lam)
    extra = gamma * values[-1].item()
    assert ended[0][-1].item() - right[-1].item() == pytest.approx(extra)  # the episode ended, yet gamma * V(s_{T-1})
    steps_back = torch.arange(6, -1, -1, dtype=torch.float64)
    assert torch.allclose(ended[0] - right, extra * (gamma * lam) ** steps_back)  # carried back by the recursion
    english = flat(explanation(RLHF_CATALOGUE, "gae_bootstraps_from_last_value", "en"))
    assert "the last TD residual gains gamma * V(s_{T-1}) even when the episode has ended" in english
    chinese = explanation(RLHF_CATALOGUE, "gae_bootstraps_from_last_value", "zh-CN")
    assert "即使回合已经结束，最后一个 TD 误差也多出了 gamma * V(s_{T-1})" in chinese
