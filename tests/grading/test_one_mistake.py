"""A rule for every check: an answer wrong in one way loses the points of the properties that mistake breaks, and no
others.  The answers here are new ones, none of them in a catalogue (instructor/*_catalogue.py), each with exactly one
mistake: float32 where the inputs are float64, float64 where they are float32, a constant instead of an argument, the
population std, an unstable log-sigmoid.  Each must lose exactly its grade ids and their points, in the English
edition and in the Chinese one (whose release keeps the same points, and whose student reads the failure in Chinese)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from rlhf_course import i18n
from rlhf_course.grading.checks import CheckFailed
from rlhf_course.grading.instructor import load_module as load_instructor_module
from tests.support import answers
from tests.support.course import cell_points, repo_course


@dataclass(frozen=True)
class OneMistake:
    name: str
    base: str       # the assignment (its Chinese edition is base + "_zh")
    function: str
    source: str
    loses: frozenset[str]
    points: float   # what those grade ids are worth


ONE_MISTAKE = [
    # PPO: computed in float32 -> only the dtype; 1.2 written for 1 + clip_epsilon -> only the eps extremes
    OneMistake("ppo_computes_in_float32", "rlhf", "ppo_clipped_objective", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    ratio, advantage = ratio.float(), advantage.float()
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_float64"}), 1),
    OneMistake("ppo_upper_bound_a_constant", "rlhf", "ppo_clipped_objective", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1.2) * advantage
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_epsilon_extremes"}), 1),
    # PPO: a wrong value (|A| in the clipped term) in float64 is not the dtype check's business
    OneMistake("ppo_abs_advantage_in_the_clipped_term", "rlhf", "ppo_clipped_objective", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage.abs()
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_visible_tests", "ppo_negative_advantage_caps_downside", "ppo_epsilon_extremes",
                "ppo_mixed_batch", "ppo_gradient"}), 2 + 1 + 1 + 1 + 2),
    # DPO: log1p(exp(-z)) overflows where log(sigmoid(z)) underflows: the same cells, the same family's name
    OneMistake("dpo_log1p_exp", "rlhf", "dpo_loss", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    z = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return torch.log1p(torch.exp(-z))
''', frozenset({"dpo_numerically_stable", "dpo_visible_tests"}), 4),
    OneMistake("dpo_beta_a_module_constant", "rlhf", "dpo_loss", '''
BETA = 0.1

def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return F.softplus(-BETA * margin)
''', frozenset({"dpo_beta_scales_margin"}), 1),
    # GAE: 0.99 written for gamma in the TD residual only
    OneMistake("gae_gamma_a_constant_in_the_td_residual", "rlhf", "compute_gae", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    advantages = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        next_v = next_value if t == len(rewards) - 1 else values[t + 1]
        running = rewards[t] + 0.99 * next_v - values[t] + gamma * gae_lambda * running
        advantages[t] = running
    return advantages
''', frozenset({"gae_gamma_zero"}), 1),
    # KL: the contract keeps the log-probs' dtype (kl_gradient_and_shape judges the form of the result)
    OneMistake("kl_returns_float64", "kl_penalty", "kl_estimator_k3", '''
def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p.double() - log_p.double()
    return torch.expm1(d) - d
''', frozenset({"kl_gradient_and_shape"}), 1),
    OneMistake("kl_computes_in_float32", "kl_penalty", "kl_estimator_k3", '''
def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p.float() - log_p.float()
    return torch.expm1(d) - d
''', frozenset({"kl_gradient_and_shape"}), 1),
    # GRPO: float32 -> only the dtype; the population std -> the std's normalisation and the two checks of the
    # advantages' values (the visible example prints them), never centring, eps, zero-spread groups or the dtype
    OneMistake("grpo_computes_in_float32", "grpo", "group_relative_advantages", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    r = rewards.float()
    if r.shape[1] < 2:
        return torch.zeros_like(r)
    centred = r - r.mean(1, keepdim=True)
    return centred / (r.std(1, keepdim=True) + eps) if scale_by_std else centred
''', frozenset({"grpo_dtype_and_float64"}), 1),
    OneMistake("grpo_population_std_by_hand", "grpo", "group_relative_advantages", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(1, keepdim=True)
    if not scale_by_std:
        return centred
    return centred / (centred.pow(2).mean(1, keepdim=True).sqrt() + eps)
''', frozenset({"grpo_visible_tests", "grpo_values", "grpo_bessel_std"}), 2 + 2 + 1),
    OneMistake("grpo_float32_zeros_for_a_group_of_one", "grpo", "group_relative_advantages", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros(rewards.shape)
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + eps) if scale_by_std else centred
''', frozenset({"grpo_dtype_and_float64"}), 1),
    OneMistake("grpo_computes_in_float32_then_casts", "grpo", "group_relative_advantages", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    r = rewards.float()
    if r.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = r - r.mean(1, keepdim=True)
    return (centred / (r.std(1, keepdim=True) + eps) if scale_by_std else centred).to(rewards.dtype)
''', frozenset({"grpo_dtype_and_float64"}), 1),
]

EDITIONS = ("", "_zh")
LANGUAGE = {"": i18n.ENGLISH, "_zh": i18n.CHINESE}


def release_points(assignment: str) -> dict[str, float]:
    """grade id -> points, as the release students fetch says."""
    return cell_points(assignment, folder="release")


@pytest.fixture
def language():
    """Sets the language for the test (as an edition's set-up cell does), then restores it."""
    before = i18n.language()
    yield i18n.set_language
    i18n.set_language(before)


def test_the_answers_are_not_the_catalogues():
    for base in ("rlhf", "grpo", "kl_penalty"):
        catalogue = load_instructor_module(repo_course(), f"{base}_catalogue")
        written = {" ".join(entry.source.split()) for entry in catalogue.WRONG_ANSWERS + catalogue.CORRECT_VARIANTS}
        assert not written & {" ".join(m.source.split()) for m in ONE_MISTAKE if m.base == base}


@pytest.mark.parametrize("edition", EDITIONS, ids=lambda e: "zh" if e else "en")
@pytest.mark.parametrize("mistake", ONE_MISTAKE, ids=lambda m: m.name)
def test_one_mistake_loses_exactly_its_properties_points(mistake, edition, language):
    language(LANGUAGE[edition])
    checks = load_instructor_module(repo_course(), f"{mistake.base}_hidden_checks")
    function_from, lost_by = answers.for_assignment(checks.CHECKS, mistake.function)
    function = function_from(mistake.source)
    lost = lost_by(function)
    assert lost == set(mistake.loses)
    points = release_points(mistake.base + edition)
    assert sum(points[grade_id] for grade_id in lost) == mistake.points
    # the student of the edition reads each failure in its language, naming the property
    messages = checks.translated_messages(checks.__file__)
    for grade_id in lost:
        with pytest.raises(CheckFailed) as failure:
            checks.run_check(grade_id, function)
        property_named = messages.get(grade_id, checks.CHECKS[grade_id].message)
        assert str(failure.value).startswith(" ".join(property_named.split())[:20]), str(failure.value)
