"""The GRPO exercise's hidden checks, in-process: an independent reference passes all, each wrong answer
students write loses exactly its cells, each correct variant none, and a failure names its property."""
import math

import pytest
import torch

from rlhf_course.grading.checks import CheckFailed
from rlhf_course.grading.instructor import load_module as load_instructor_module
from tests.support.course import REPO, repo_course
from tests.support import answers

checks = load_instructor_module(repo_course(), "grpo_hidden_checks")
catalogue = load_instructor_module(repo_course(), "grpo_catalogue")


function_from, lost_by = answers.for_assignment(checks.CHECKS, "group_relative_advantages")


def by_hand(rewards, scale_by_std=True, eps=1e-4):
    """The contract, one group at a time in Python floats: no torch reduction involved."""
    rows = []
    for group in rewards.double().tolist():
        size = len(group)
        mean = sum(group) / size
        if size < 2:
            rows.append([0.0])
            continue
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (size - 1))
        rows.append([(r - mean) / (std + eps) if scale_by_std else r - mean for r in group])
    return torch.tensor(rows, dtype=torch.float64).to(rewards.dtype)


def test_an_independent_reference_passes_every_check():
    assert lost_by(by_hand) == set()
    checks.run_check("grpo_values", by_hand)


@pytest.mark.parametrize("wrong", catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_wrong_answer_loses_exactly_its_cells(wrong):
    assert lost_by(function_from(wrong.source)) == set(wrong.loses)


@pytest.mark.parametrize("variant", catalogue.CORRECT_VARIANTS, ids=lambda v: v.name)
def test_each_correct_variant_gets_full_marks(variant):
    assert lost_by(function_from(variant.source)) == set()


def test_a_failure_names_the_property_and_the_mistake():
    population = function_from(catalogue.WRONG_BY_NAME["grpo_population_std"].source)
    with pytest.raises(CheckFailed, match="Bessel-corrected .* What went wrong: the std is the population std"):
        checks.run_check("grpo_bessel_std", population)
    nan = function_from(catalogue.WRONG_BY_NAME["grpo_nan_for_one_response"].source)
    with pytest.raises(CheckFailed, match="never NaN.*must be finite.*groups of one response"):
        checks.run_check("grpo_degenerate_groups", nan)


def test_a_std_never_divided_by_is_named_as_such_not_as_eps_misplaced():
    """Rewards 1e-4 apart: advantages left unscaled fail the eps check too; its line says what is missing."""
    def centred_only(rewards, scale_by_std=True, eps=1e-4):
        return rewards - rewards.mean(dim=1, keepdim=True)
    with pytest.raises(CheckFailed, match="not divided by the group's std at all") as failed:
        checks.run_check("grpo_eps_outside_sqrt", centred_only)
    assert "outside the square root: " not in str(failed.value).split("What went wrong")[1]
    eps_inside = function_from(catalogue.WRONG_BY_NAME["grpo_eps_inside_sqrt"].source)
    with pytest.raises(CheckFailed, match="What went wrong: .*eps is added to the std, outside the square root"):
        checks.run_check("grpo_eps_outside_sqrt", eps_inside)


def test_the_visible_example_numbers():
    # group 1: mean 0.5, std sqrt(1/3); group 2: mean 4, std sqrt(26/3)
    scaled = checks.advantages_reference(torch.tensor(checks.VISIBLE_REWARDS))
    assert scaled[0].tolist() == pytest.approx([0.5 / (math.sqrt(1 / 3) + 1e-4) * s for s in (1, -1, -1, 1)])
    assert scaled[1].tolist() == pytest.approx([k / (math.sqrt(26 / 3) + 1e-4) for k in (-3, -1, 0, 4)])
    # the notebook prints four decimals: none of them sits near a rounding boundary, in float32 either
    shown = [round(v, 4) for v in scaled.float().flatten().tolist()]
    assert shown == [0.8659, -0.8659, -0.8659, 0.8659, -1.019, -0.3397, 0.0, 1.3587]


def test_the_scaling_cells_numbers():
    """grpo_scaling and grpo_contract: the spread std / (std + eps) is near 1 only well above eps; equal rewards give
    exactly 0 only when their float mean is exact; 7 of 8 right with 0/1 rewards scales the wrong answer's -0.875."""
    assert [round(s / (s + 1e-4), 3) for s in (0.0058, 1e-3, 1e-4)] == [0.983, 0.909, 0.5]
    assert checks.advantages_reference(torch.full((1, 6), 0.3)).abs().max().item() == 0.0  # float64: exact mean
    six = torch.full((1, 6), 0.3)  # float32, as a student's function computes it
    centred = six - six.mean(1, keepdim=True)
    assert (centred / (six.std(1, keepdim=True) + 1e-4)).tolist()[0] == pytest.approx([2.98e-4] * 6, rel=1e-2)
    assert (centred / six.std(1, keepdim=True)).tolist()[0] == pytest.approx([0.913] * 6, rel=1e-2)  # eps = 0
    seven_of_eight = checks.advantages_reference(torch.tensor([[1.0] * 7 + [0.0]]))
    assert seven_of_eight[0, -1].item() == pytest.approx(-2.47, abs=5e-3)
    assert seven_of_eight[0, 0].item() == pytest.approx(0.353, abs=5e-4)


def test_the_group_mean_baseline_is_a_shrunk_leave_one_out_baseline():
    """What the notebook teaches: r - mean(group) = (G - 1) / G * (r - mean(others))."""
    rewards = torch.randn(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    group = rewards.shape[1]
    leave_one_out = rewards - (rewards.sum(1, keepdim=True) - rewards) / (group - 1)
    assert torch.allclose(checks.advantages_reference(rewards, False), (group - 1) / group * leave_one_out)


def test_the_notebooks_hidden_cells_match_the_checks():
    from rlhf_course.course import notebooks
    cells = notebooks.cells_by_grade_id(notebooks.read(REPO / "source" / "grpo" / "grpo.ipynb"))
    for check in checks.HIDDEN_CHECKS.values():
        cell = cells[check.id]
        assert cell.metadata["nbgrader"]["points"] > 0 and cell.metadata["nbgrader"]["grade"]
        assert f'run_check("{check.id}", group_relative_advantages)' in cell.source and "BEGIN HIDDEN TESTS" in cell.source
    assert cells["grpo_visible_tests"].metadata["nbgrader"]["grade"] and "grpo_visible_tests" in checks.CHECKS
    reference = function_from(notebooks.solution_answers(notebooks.read(REPO / "source" / "grpo" / "grpo.ipynb"))["grpo_answer"])
    assert lost_by(reference) == set()
