"""The checks harness (rlhf_course/grading/checks.py), on a made-up check: it knows no assignment."""
import pytest
import torch

from rlhf_course.grading import checks
from rlhf_course.grading.sandbox.observe import Case, Observation, observe


def _double_cases():
    return [Case((torch.tensor([1.0, 2.0]),)), Case((torch.tensor([-3.0]),), note="a negative input")]


def _double_judge(case, obs, recall):
    return checks.compare(obs.value, case.args[0].double() * 2, rtol=0, atol=1e-6, what="result")


DOUBLES = checks.Check("doubles", "double", "the result is twice the input", _double_cases, _double_judge)


def test_evaluate_passes_a_right_function_and_names_the_first_wrong_case():
    assert checks.evaluate(DOUBLES, lambda x: x * 2) is None
    assert checks.evaluate(DOUBLES, lambda x: x.abs() * 2) == "result [6], expected [-6] (a negative input)"


def test_run_raises_with_the_property_and_prints_a_pass(capsys):
    checks.run(DOUBLES, lambda x: x + x)
    assert capsys.readouterr().out == "passed: the result is twice the input\n"
    with pytest.raises(checks.CheckFailed, match=r"^the result is twice the input\. What went wrong: result "):
        checks.run(DOUBLES, lambda x: x * 3)


def test_judge_observation_reports_errors_and_non_tensors_before_judging():
    case = _double_cases()[0]
    assert "ZeroDivisionError" in checks.judge_observation(DOUBLES, case, observe(lambda x: 1 / 0, case), None)
    listed = observe(lambda x: [2.0, 4.0], case)
    assert checks.judge_observation(DOUBLES, case, listed, None) == "must return a torch.Tensor, got list"


@pytest.mark.parametrize("got, message", [
    (torch.tensor([2.0, 4.0, 6.0]), "value has shape (3,), expected (2,)"),
    (torch.tensor([2, 4]), "value has dtype torch.int64, expected a floating-point tensor"),
    (torch.tensor([2.0, float("nan")]), "value is not finite: [2, nan]"),
    (torch.tensor([2.0, 4.1]), "value [2, 4.1], expected [2, 4]"),
])
def test_compare_says_what_differs(got, message):
    assert checks.compare(got, torch.tensor([2.0, 4.0]), rtol=1e-3, atol=1e-6) == message
    assert checks.compare(torch.tensor([2.0, 4.001]), torch.tensor([2.0, 4.0]), rtol=1e-3, atol=0) is None


def test_unmodified_catches_in_place_writes_and_ignored_inputs():
    case = Case((torch.tensor([1.0, 2.0]),))
    recall = lambda c: observe(lambda x: x * 2, c)  # noqa: E731
    assert checks.unmodified(case, observe(lambda x: x * 2, case), ("x",), recall) is None
    assert checks.unmodified(case, observe(lambda x: x.mul_(2), case), ("x",), recall) == \
        "the input `x` was changed in place"
    constant = lambda c: observe(lambda x: torch.ones(2), c)  # noqa: E731
    assert checks.unmodified(case, constant(case), ("x",), constant) == "the result does not depend on `x`"


def test_gradients_name_the_argument_that_got_none_or_a_wrong_one():
    case = Case((torch.tensor([1.0, 2.0]),), grad_wrt=(0,))
    want = {0: torch.full((2,), 2.0, dtype=torch.float64)}
    assert checks.gradients(case, observe(lambda x: x * 2, case), want, ("x",)) is None
    assert checks.gradients(case, observe(lambda x: x * 3, case), want, ("x",)) == "d/dx [3, 3], expected [2, 2]"
    assert "backward() failed" in checks.gradients(case, observe(lambda x: x.detach() * 2, case), want, ("x",))
    no_grad = Observation(value=torch.zeros(2), grads={})
    assert checks.gradients(case, no_grad, want, ("x",)) == "no gradient reached `x` (is the graph detached?)"


def test_two_checks_with_one_id_are_refused():
    assert list(checks.by_id([DOUBLES])) == ["doubles"]
    with pytest.raises(ValueError, match="two checks have the id 'doubles'"):
        checks.by_id([DOUBLES, DOUBLES])


def test_the_harness_holds_no_assignment():
    """The package reaches the sandbox and students' machines: no reference, no case, no check of ours."""
    import inspect
    text = inspect.getsource(checks).lower()
    for word in ("ppo", "dpo", "gae", "sigmoid", "clamp", "advantage", "beta"):
        assert word not in text, word


VISIBLE_DOUBLES = checks.Check("doubles_visible", "double", "the visible example", _double_cases, _double_judge,
                               visible=True)


NOT_WRITTEN_YET = ("raised NotImplementedError: {function} is not written yet: replace `raise NotImplementedError()` in "
                   "its answer cell with your code, run that cell and the visible test under it, then submit again")


def _not_written_yet(x):
    raise NotImplementedError()  # nbgrader's stub, as released


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_function_not_written_yet_is_told_so_with_the_next_step_in_the_notebook_s_language(language):
    """The released stub raises NotImplementedError with no message: the student's feedback line (the whole one, for
    a visible test the student has the inputs of; the public one for a hidden test) says that the function is not
    written yet and what to do, never an empty "raised NotImplementedError: "."""
    from rlhf_course.grading.trusted import _cell_result
    from rlhf_course.i18n import speaking, t
    case = _double_cases()[1]
    observation = observe(_not_written_yet, case)  # in the sandbox: no language of the notebook's there
    with speaking(language):
        detail = checks.judge_observation(VISIBLE_DOUBLES, case, observation, None)
        visible = _cell_result(VISIBLE_DOUBLES, 2, detail, False, language).message
        hidden = _cell_result(DOUBLES, 2, detail, True, language).message
    said = t(NOT_WRITTEN_YET, language, function="double")
    assert said != t(NOT_WRITTEN_YET, "zh-CN" if language == "en" else "en", function="double")  # translated
    for message in (visible, hidden):
        assert said in message and "NotImplementedError: (" not in message and "：（" not in message, message
        assert message.endswith(t("{detail} ({note})", language, detail="", note="a negative input").strip()), message


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_another_error_is_named_in_the_notebook_s_language_and_an_empty_message_leaves_no_dangling_colon(language):
    from rlhf_course.i18n import speaking, t
    case = _double_cases()[0]
    with speaking(language):
        named = checks.judge_observation(VISIBLE_DOUBLES, case, observe(lambda x: x[5], case), None)
        bare = checks.judge_observation(VISIBLE_DOUBLES, case, observe(_raises_bare_value_error, case), None)
    assert named.startswith(t("raised {error}", language, error="IndexError: index 5 is out of bounds")), named
    assert bare == t("raised {error}", language, error="ValueError"), bare


def _raises_bare_value_error(x):
    raise ValueError
