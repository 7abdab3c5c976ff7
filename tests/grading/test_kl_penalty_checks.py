"""The KL-penalty exercise's hidden checks, in-process: the reference passes all, each wrong answer loses
exactly its cells, each correct variant none, and the notebook's hidden cells match the checks."""

import re

import pytest
import torch

from rlhf_course.course import notebooks
from rlhf_course.grading.checks import CheckFailed
from rlhf_course.grading.instructor import load_module as load_instructor_module
from tests.support.course import REPO, repo_course
from rlhf_course.floating_point import k3_float64, k3_rounding_errors, literal_k3
from tests.support import answers

SOURCE = REPO / "source" / "kl_penalty" / "kl_penalty.ipynb"
checks = load_instructor_module(repo_course(), "kl_penalty_hidden_checks")
catalogue = load_instructor_module(repo_course(), "kl_penalty_catalogue")


function_from, lost_by = answers.for_assignment(checks.CHECKS, "kl_estimator_k3")
SIZES = [1e-3, 1e-4, 3e-5, 1e-5]  # the |d| the notebook's two measurement cells print


def test_the_reference_passes_every_check():
    reference = function_from(notebooks.solution_answers(notebooks.read(SOURCE))["kl_answer"])
    assert lost_by(reference) == set()
    checks.run_check("kl_values", reference)


@pytest.mark.parametrize("wrong", catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_wrong_answer_loses_exactly_its_cells(wrong):
    assert lost_by(function_from(wrong.source)) == set(wrong.loses)


@pytest.mark.parametrize("variant", catalogue.CORRECT_VARIANTS, ids=lambda v: v.name)
def test_each_correct_variant_gets_full_marks(variant):
    assert lost_by(function_from(variant.source)) == set()


def test_a_failure_names_the_property():
    naive = function_from(catalogue.WRONG_BY_NAME["kl_naive_exp_minus_one"].source)
    with pytest.raises(CheckFailed, match="stays accurate in float32 .* What went wrong: k3 "):
        checks.run_check("kl_stable_when_close", naive)


def test_the_naive_form_is_really_inaccurate_in_float32():
    """What the stability check rests on: at |d| = 1e-3, exp(d) - 1 - d in float32 is off by over 10 %."""
    d = torch.tensor([1e-3, -1e-3, 3e-4])
    exact = torch.expm1(d.double()) - d.double()
    naive = (torch.exp(d) - 1 - d).double()
    stable = (torch.expm1(d) - d).double()
    assert ((naive - exact).abs() / exact).max() > 0.1
    assert ((stable - exact).abs() / exact).max() < 1e-3


def test_the_literal_forms_error_grows_like_one_over_d_squared():
    """The derivation's numbers, which its measurement cell prints: the error of exp(d) - 1 - d is the rounding of
    exp(d), whatever d, so relative to k3 ~ d^2 / 2 it is about 4 %, 4, 44 and 400 times k3 (median) at
    |d| = 1e-3, 1e-4, 3e-5 and 1e-5, at most about 15 %, 15, 160 and 1500 times."""
    rows = k3_rounding_errors(literal_k3, SIZES)
    assert [row.median for row in rows] == pytest.approx([0.04, 4, 44, 400], rel=0.05)
    assert [row.max for row in rows] == pytest.approx([0.15, 15, 160, 1500], rel=0.05)


def reference_k3():
    return function_from(notebooks.solution_answers(notebooks.read(SOURCE))["kl_answer"])


def test_k3_built_on_expm1_stays_within_eps_over_d():
    """The derivation: a k3 built on torch.expm1 keeps a relative error of at most about eps / |d| (eps ~ 1.2e-7),
    at most 1.2e-4 at |d| = 1e-3, measured on the instructor's answer; and (r - 1) - log r with r = e^d rounded
    once is nearly as accurate there, at most 2.4e-4."""
    rows = k3_rounding_errors(reference_k3(), SIZES)
    assert all(row.max < 1.3e-7 / row.size and row.negative == 0 for row in rows)
    assert round(rows[0].max, 5) == 1.2e-4

    def rounded_r_once(log_p, ref_log_p):
        r = torch.exp(ref_log_p - log_p)
        return (r - 1) - torch.log(r)
    assert round(k3_rounding_errors(rounded_r_once, SIZES[:1])[0].max, 5) == 2.4e-4


def test_the_float64_yardstick_is_k3_to_float64_precision():
    """k3_float64, the measurement's reference, against 50-digit arithmetic: within 3e-16 of k3 relative, over
    |d| from 1e-8 to its limit 0.01; beyond the limit it refuses rather than be wrong."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    d = torch.tensor([s * m for m in (1e-8, 1e-5, 3e-5, 1e-4, 1.1e-3, 3e-3, 0.01) for s in (1, -1)],
                     dtype=torch.float64)
    for value, series in zip(d.tolist(), k3_float64(d).tolist()):
        exact = mpmath.expm1(mpmath.mpf(value)) - mpmath.mpf(value)
        assert abs(float((mpmath.mpf(series) - exact) / exact)) < 3e-16, value
    with pytest.raises(ValueError, match=r"\|d\| <= 0.01; got \|d\| up to 0.02"):
        k3_float64(torch.tensor([0.001, -0.02]))


def test_the_float64_yardstick_is_not_an_answer():
    """The series the package holds fails the hidden checks as an answer: it holds only for small |d|."""
    series_answer = lambda log_p, ref_log_p: k3_float64(ref_log_p - log_p).to(log_p.dtype)  # noqa: E731
    assert {"kl_values"} <= lost_by(series_answer)


def test_the_measurement_names_an_estimator_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"one k3 per token, shape \(10,\); got \(\)"):
        k3_rounding_errors(lambda log_p, ref_log_p: (ref_log_p - log_p).sum(), [1e-3], draws=10)


NEGATIVE_SHARE_SAID = {  # the derivation's sentence, per edition: "in 44 % of the draws at |d| = 1e-4"
    "kl_penalty": r"in (\d+) % of the draws at \$\|d\| = 10\^\{-4\}\$",
    "kl_penalty_zh": r"在 \$\|d\| = 10\^\{-4\}\$ 处，(\d+)% 的取值结果为负",
}


@pytest.mark.parametrize("edition", sorted(NEGATIVE_SHARE_SAID))
def test_the_measurement_cell_prints_the_share_of_negatives_the_derivation_states(edition, capsys):
    """The derivation says the literal form is never negative at |d| = 1e-3, negative in 44 % of the draws at
    1e-4 and in about half of them below, and that the cell after it measures this: the cell prints each share."""
    cells = notebooks.cells_by_grade_id(notebooks.read(REPO / "source" / edition / "kl_penalty.ipynb"))
    said = re.search(NEGATIVE_SHARE_SAID[edition], cells["kl_derivation"].source.replace("\n", " "))
    assert said, f"{edition}: the derivation no longer states the share of negatives at |d| = 1e-4"
    exec(compile(cells["kl_rounding"].source, f"{edition}/kl_rounding", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    shares = [int(re.search(r"(\d+)%", line).group(1)) for line in printed]
    assert len(shares) == 4, printed  # one line per |d|: 1e-3, 1e-4, 3e-5, 1e-5
    assert shares[0] == 0 and shares[1] == int(said.group(1))
    assert all(45 <= share <= 55 for share in shares[2:]), shares


@pytest.mark.parametrize("edition", sorted(NEGATIVE_SHARE_SAID))
def test_the_cell_after_the_answer_measures_the_students_own_k3(edition, capsys):
    """The cell after the visible test measures the student's kl_estimator_k3: with the instructor's answer it
    prints errors within 1.2e-7 / |d| and no negatives; with the literal exp(d) - 1 - d, the literal form's."""
    cells = notebooks.cells_by_grade_id(notebooks.read(REPO / "source" / edition / "kl_penalty.ipynb"))
    order = list(cells)
    assert order.index("kl_answer") < order.index("kl_rounding_yours")
    assert "kl_estimator_k3" not in cells["kl_rounding"].source.replace("Your own kl_estimator_k3", "").replace(
        "你自己的 kl_estimator_k3", "")  # before the answer, only the literal form is measured
    naive = function_from(catalogue.WRONG_BY_NAME["kl_naive_exp_minus_one"].source)
    printed = {}
    for name, estimator in (("reference", reference_k3()), ("naive", naive)):
        exec(compile(cells["kl_rounding_yours"].source, f"{edition}/kl_rounding_yours", "exec"),
             {"kl_estimator_k3": estimator})
        printed[name] = capsys.readouterr().out.splitlines()
        assert len(printed[name]) == len(SIZES), printed[name]
    number = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-\d+)?(?![\d.])")  # not the 3 of k3
    numbers = lambda line: [float(x) for x in number.findall(line)]  # noqa: E731
    for size, line in zip(SIZES, printed["reference"]):
        _, median, largest, bound, negative = numbers(line.split("=", 1)[1].replace("1.2e-7 / |d|", ""))
        assert median <= largest < 1.3e-7 / size and negative == 0, line
    assert [int(re.search(r"(\d+)%", line).group(1)) for line in printed["naive"]][1] == 44


def test_the_notebooks_hidden_cells_match_the_checks():
    cells = notebooks.cells_by_grade_id(notebooks.read(SOURCE))
    for check in checks.HIDDEN_CHECKS.values():
        cell = cells[check.id]
        assert cell.metadata["nbgrader"]["points"] > 0 and cell.metadata["nbgrader"]["grade"]
        assert f'run_check("{check.id}", kl_estimator_k3)' in cell.source and "BEGIN HIDDEN TESTS" in cell.source
    assert cells["kl_visible_tests"].metadata["nbgrader"]["grade"] and "kl_visible_tests" in checks.CHECKS


def test_the_visible_example_numbers():
    r = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    k3 = (r - 1 - r.log()).tolist()
    assert k3 == pytest.approx([0.19315, 0.30685, 0.0], abs=1e-5)
    assert checks.kl_reference(torch.log(torch.tensor([0.5, 0.25, 0.25])),
                               torch.log(torch.tensor([0.25, 0.5, 0.25]))).tolist() == pytest.approx(k3, abs=1e-6)
