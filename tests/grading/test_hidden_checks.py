"""The hidden checks, in-process: the reference passes every one, each catalogued mistake fails
exactly the checks it should, and the notebook's hidden cells match the checks."""
import math

import pytest
import torch
import torch.nn.functional as F

import answer_catalogue
import rlhf_hidden_checks as checks
from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.grading import notebooks

VISIBLE = {"ppo_visible_tests", "dpo_visible_tests", "gae_visible_tests"}


@pytest.fixture(scope="module")
def source_nb(repo):
    return notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)


def load_answers(answers: dict[str, str]) -> dict:
    namespace = {"torch": torch, "F": F, "math": math}
    for source in answers.values():
        exec(source, namespace)
    return namespace


@pytest.fixture(scope="module")
def reference(source_nb):
    return load_answers(notebooks.solution_answers(source_nb))


def failing_checks(namespace) -> dict[str, str]:
    failed = {}
    for check in checks.CHECKS.values():
        detail = checks.evaluate(check, namespace[check.function])
        if detail is not None:
            failed[check.id] = detail
    return failed


def test_reference_solution_passes_every_check(reference):
    assert failing_checks(reference) == {}


@pytest.mark.parametrize("wrong", answer_catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_mistake_fails_exactly_its_properties(wrong, source_nb):
    answers = notebooks.solution_answers(source_nb)
    answers[wrong.answer_cell] = wrong.source
    failed = failing_checks(load_answers(answers))
    assert set(failed) == set(wrong.loses), failed


def test_catalogue_is_large_and_covers_every_function():
    assert len(answer_catalogue.WRONG_ANSWERS) >= 8
    assert {w.answer_cell for w in answer_catalogue.WRONG_ANSWERS} == {"ppo_answer", "dpo_answer", "gae_answer"}
    for wrong in answer_catalogue.WRONG_ANSWERS:
        assert wrong.loses, f"{wrong.name} must lose something"


def test_hidden_cells_match_checks(source_nb):
    """One grade cell per check, with the check's points, calling it on the right function."""
    cells = notebooks.cells_by_grade_id(source_nb)
    for check in checks.HIDDEN_CHECKS.values():
        cell = cells[check.id]
        meta = cell.metadata["nbgrader"]
        assert meta["grade"] and meta["locked"] and meta["points"] == check.points
        assert f'run_check("{check.id}", {check.function})' in cell.source
        assert check.function in STUDENT_FUNCTIONS
    hidden_cells = [c for c in source_nb.cells if "### BEGIN HIDDEN TESTS" in c.source]
    assert len(hidden_cells) == len(checks.HIDDEN_CHECKS)
    for check_id in VISIBLE:  # visible cells exist with the points the trusted grader gives them
        assert cells[check_id].metadata["nbgrader"]["points"] == checks.CHECKS[check_id].points


def test_failure_message_names_the_property(source_nb):
    wrong = answer_catalogue.WRONG_BY_NAME["ppo_clip_without_min"]
    namespace = load_answers({"ppo_answer": wrong.source})
    with pytest.raises(AssertionError, match="clipping must not apply to r < 1 - eps when A > 0"):
        checks.run_check("ppo_positive_advantage_keeps_downside", namespace["ppo_clipped_objective"])


def test_hard_coded_visible_answers_score_nothing_hidden():
    """Returning the visible examples' numbers passes no value check."""
    hard_coded = {
        "ppo_clipped_objective": lambda ratio, advantage, clip_epsilon=0.2: torch.tensor(1.02),
        "dpo_loss": lambda *args, **kw: torch.tensor(0.5544),
        "compute_gae": lambda rewards, values, *a, **kw: torch.tensor([7.0051, 7.4589, 7.9415, 8.4545, 9.0]),
    }
    passed = {c.id for c in checks.HIDDEN_CHECKS.values() if checks.evaluate(c, hard_coded[c.function]) is None}
    assert passed == set(), passed


def test_only_exact_tensors_count():
    class Sneaky(torch.Tensor):
        def __eq__(self, other):
            return True

    def returns_subclass(ratio, advantage, clip_epsilon=0.2):
        return torch.tensor(1.0).as_subclass(Sneaky)

    detail = checks.evaluate(checks.CHECKS["ppo_mixed_batch"], returns_subclass)
    assert detail is not None and "torch.Tensor" in detail


def test_exceptions_and_warnings_are_data():
    import warnings

    def noisy(ratio, advantage, clip_epsilon=0.2):
        warnings.warn("a harmless warning")
        return torch.minimum(ratio * advantage,
                             torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage).mean()

    def crashes(*args):
        raise ValueError("boom")

    assert checks.evaluate(checks.CHECKS["ppo_mixed_batch"], noisy) is None
    assert "ValueError: boom" in checks.evaluate(checks.CHECKS["ppo_mixed_batch"], crashes)


def test_references_match_the_guide_examples():
    ratio = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0])
    assert checks.ppo_reference(ratio, torch.ones(5), 0.2).mean().item() == pytest.approx(1.02)
    assert checks.ppo_reference(ratio, -torch.ones(5), 0.2).mean().item() == pytest.approx(-1.66)
    t = torch.tensor
    assert checks.dpo_reference(t(-2.0), t(-5.0), t(-3.0), t(-3.0), 0.1).item() == pytest.approx(0.55436, abs=1e-5)
    assert checks.dpo_reference(t(-5.0), t(-2.0), t(-3.0), t(-3.0), 0.1).item() == pytest.approx(0.85436, abs=1e-5)
    gae = checks.gae_reference(t([0.0, 0, 0, 0, 10]), torch.ones(5), 0.0, 0.99, 0.95)
    assert gae.tolist() == pytest.approx([7.0051, 7.4589, 7.9415, 8.4545, 9.0], abs=1e-4)


def test_hidden_inputs_differ_from_visible_ones():
    visible_ratio = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0])
    for check in checks.HIDDEN_CHECKS.values():
        for case in check.cases():
            first = case.args[0]
            assert not (first.shape == visible_ratio.shape and torch.equal(first.float(), visible_ratio))
