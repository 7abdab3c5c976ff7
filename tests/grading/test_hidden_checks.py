"""The hidden checks, in-process: the reference passes every one, each catalogued mistake fails
exactly the checks it should, and the notebook's hidden cells match the checks."""
import ast
import math

import pytest
import torch
import torch.nn.functional as F

import rlhf_catalogue
import rlhf_hidden_checks as checks
from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.course import notebooks

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


@pytest.mark.parametrize("wrong", rlhf_catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_mistake_fails_exactly_its_properties(wrong, source_nb):
    answers = notebooks.solution_answers(source_nb)
    answers[wrong.answer_cell] = wrong.source
    failed = failing_checks(load_answers(answers))
    assert set(failed) == set(wrong.loses), failed


@pytest.mark.parametrize("variant", rlhf_catalogue.CORRECT_VARIANTS, ids=lambda v: v.name)
def test_each_correct_variant_gets_full_marks(variant, source_nb):
    answers = notebooks.solution_answers(source_nb)
    answers[variant.answer_cell] = variant.source
    assert failing_checks(load_answers(answers)) == {}


def test_correct_variants_cover_three_styles_per_function():
    cells = [v.answer_cell for v in rlhf_catalogue.CORRECT_VARIANTS]
    for cell in ("ppo_answer", "dpo_answer", "gae_answer"):
        assert cells.count(cell) >= 3, cell
    sources = {v.name: v.source for v in rlhf_catalogue.CORRECT_VARIANTS}
    assert any("torch.no_grad()" in s for s in sources.values())  # the reference as a trainer computes it
    assert any(".detach()" in s for s in sources.values())
    loops = {n: any(isinstance(node, (ast.For, ast.While)) for node in ast.walk(ast.parse(s)))
             for n, s in sources.items()}
    assert any(not loops[n] for n in sources if n.startswith("gae")), loops  # a vectorised GAE
    # the submissions built from them use each variant exactly once
    used = [src for answers in rlhf_catalogue.correct_variant_classes().values() for src in answers.values()]
    assert sorted(used) == sorted(sources.values())


def test_reference_needs_no_gradient():
    """The contract is about the policy: an answer that never lets a gradient reach the reference
    earns dpo_gradient; one that blocks the policy's gradient does not."""
    def detached_reference(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
        with torch.no_grad():
            ref_margin = ref_log_p_w - ref_log_p_l
        return -F.logsigmoid(beta * (log_p_w - log_p_l - ref_margin))

    def detached_policy(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
        margin = (log_p_w.detach() - ref_log_p_w) - (log_p_l.detach() - ref_log_p_l)
        return -F.logsigmoid(beta * margin)

    def wrong_reference_gradient(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
        # right value and policy gradient, but a gradient of the wrong sign reaches the reference
        ref = ref_log_p_w - ref_log_p_l
        return -F.logsigmoid(beta * (log_p_w - log_p_l - (2 * ref.detach() - ref)))

    check = checks.CHECKS["dpo_gradient"]
    assert checks.evaluate(check, detached_reference) is None
    assert checks.evaluate(check, detached_policy) is not None  # backward() fails: no graph at all
    assert "d/dref_log_p_w" in checks.evaluate(check, wrong_reference_gradient)
    cases = check.cases()
    assert {c.grad_wrt for c in cases} == {(0, 1), (0, 1, 2, 3)}  # reference with and without requires_grad


def _ppo_tokens(check_id):
    """(ratio, advantage) of every token in a PPO check's cases."""
    pairs = []
    for case in checks.CHECKS[check_id].cases():
        ratio, advantage = case.args[0], case.args[1]
        advantage = torch.broadcast_to(advantage, ratio.shape)
        pairs += list(zip(ratio.reshape(-1).tolist(), advantage.reshape(-1).tolist()))
    return pairs


@pytest.mark.parametrize("check_ids, every_decade", [
    (("ppo_positive_advantage_caps_upside", "ppo_positive_advantage_keeps_downside",
      "ppo_negative_advantage_caps_downside", "ppo_negative_advantage_keeps_upside"), True),
    (("ppo_mixed_batch",), True), (("ppo_epsilon_extremes",), False), (("ppo_gradient",), False)],
    ids=lambda x: x[0] if isinstance(x, tuple) else "")
def test_ppo_cases_span_six_orders_of_magnitude_for_both_signs(check_ids, every_decade):
    """A different objective that only differs for large or tiny ratios (dual-clip PPO bounds
    r * A by 3 * A when A < 0) must not pass: ratios from about 1e-3 to 1e3 for each sign of A."""
    pairs = [p for check_id in check_ids for p in _ppo_tokens(check_id)]
    for sign in (+1, -1):
        ratios = [r for r, a in pairs if a * sign > 0]
        assert min(ratios) <= 1e-2 and max(ratios) >= 1e2, (sign, min(ratios), max(ratios))
        if every_decade:
            decades = {math.floor(math.log10(r)) for r in ratios}
            assert set(range(-3, 3)) <= decades, (sign, sorted(decades))


def test_gamma_lambda_zero_is_exercised_only_where_it_is_the_property():
    """The powers-of-(gamma * lambda) GAE is right except at gamma * lambda = 0 (0 / 0): the cells
    with such a case are exactly those about lambda = 0 and gamma = 0, so it loses only those."""
    exercising = {check.id for check in checks.checks_for("compute_gae", hidden_only=False)
                  if any(case.args[3] * case.args[4] == 0 for case in check.cases())}
    assert exercising == {"gae_lambda_zero_is_td_residual", "gae_gamma_zero"}
    assert rlhf_catalogue.WRONG_BY_NAME["gae_vectorised_powers_nan"].loses == exercising


def test_clamp_without_min_gives_1_08_on_the_visible_example():
    namespace = load_answers({"ppo_answer": rlhf_catalogue.WRONG_BY_NAME["ppo_clip_without_min"].source})
    ratio = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0])
    value = namespace["ppo_clipped_objective"](ratio, torch.ones(5), 0.2).item()
    assert value == pytest.approx(1.08, abs=1e-6)
    assert checks.ppo_reference(ratio, torch.ones(5), 0.2).mean().item() == pytest.approx(1.02)


def test_next_value_message_tells_when_it_is_v_s_t_and_when_0():
    message = checks.CHECKS["gae_bootstraps_next_value"].message
    assert "rollout segment" in message and "V(s_T)" in message
    assert "reward model" in message and "next_value = 0" in message


def test_catalogue_is_large_and_covers_every_function():
    assert len(rlhf_catalogue.WRONG_ANSWERS) >= 8
    assert {w.answer_cell for w in rlhf_catalogue.WRONG_ANSWERS} == {"ppo_answer", "dpo_answer", "gae_answer"}
    for wrong in rlhf_catalogue.WRONG_ANSWERS:
        assert wrong.loses, f"{wrong.name} must lose something"


def test_hidden_cells_match_checks(source_nb):
    """One grade cell per check, autograded and locked, calling it on the right function (what it is worth is
    the cell's nbgrader.points alone)."""
    cells = notebooks.cells_by_grade_id(source_nb)
    for check in checks.HIDDEN_CHECKS.values():
        cell = cells[check.id]
        meta = cell.metadata["nbgrader"]
        assert meta["grade"] and meta["locked"] and meta["points"] > 0
        assert f'run_check("{check.id}", {check.function})' in cell.source
        assert check.function in STUDENT_FUNCTIONS
    hidden_cells = [c for c in source_nb.cells if "### BEGIN HIDDEN TESTS" in c.source]
    assert len(hidden_cells) == len(checks.HIDDEN_CHECKS)
    for check_id in VISIBLE:  # visible cells exist, autograded: the trusted grader re-decides them
        assert cells[check_id].metadata["nbgrader"]["grade"] and cells[check_id].metadata["nbgrader"]["points"] > 0


def test_failure_message_names_the_property(source_nb):
    wrong = rlhf_catalogue.WRONG_BY_NAME["ppo_clip_without_min"]
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
