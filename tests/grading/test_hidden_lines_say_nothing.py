"""A failed hidden check's line, as a student reads it, is made of the grader's words only: the check's message, a
category (wrong value, wrong shape, not a floating-point tensor, not finite, raised a built-in class, returned a
kind of value, backward failed, changed its input, ...), the judge's own sentence and the case's note.  Nothing the
student's function returned or raised after a hidden input reached it, and nothing the reference computed on a
hidden input, is in it.

The hidden cases are the same for every student and every term, so any such value would let a student read hidden
inputs back (a function that returns its input) or the reference's answers.  The test that cannot be fooled: echo
attackers, each turning what it was called with into what the grader observes (the input returned, its first value
broadcast, a shape or an exception made of its values, a backward that raises them), are judged on two draws of
every assignment's hidden cases; a student's line must be the same byte for byte, while the instructor's line
shows the draws differ.  And a wrong but finite answer's lines never show a value the reference expected.
"""
from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from rlhf_course import i18n
from rlhf_course.course import notebooks
from rlhf_course.grading import checks, instructor
from rlhf_course.grading.checks import evaluate, public_note, public_text
from tests.support.course import REPO, repo_course

ASSIGNMENTS = {"rlhf": "rlhf_building_blocks.ipynb", "kl_penalty": "kl_penalty.ipynb", "grpo": "grpo.ipynb"}
LANGUAGES = (i18n.ENGLISH, i18n.CHINESE)
SECOND_DRAW = 7919  # added to every seed of an assignment's cases: other inputs, the same regimes


def _first_tensor(args) -> torch.Tensor:
    return next(a for a in args if isinstance(a, torch.Tensor))


def _digits(tensor: torch.Tensor) -> str:
    return "".join(f"{abs(v):.6f}".replace(".", "") for v in tensor.detach().double().reshape(-1)[:3].tolist())


class _BackwardSaysIt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.text = repr(x.detach().reshape(-1)[:4].tolist())
        return x.sum() * 0 + x.reshape(-1)[0]

    @staticmethod
    def backward(ctx, grad):
        raise ValueError(ctx.text)


def _raises_its_values(*args):
    raise ValueError(repr(_first_tensor(args).tolist()))


def _raises_a_class_named_for_its_values(*args):
    raise type("Leak_" + _digits(_first_tensor(args)), (Exception,), {})("named for the inputs")


def _changes_its_input(*args):
    x = _first_tensor(args)
    return x.add_(x.reshape(-1)[0].item())


ECHOES = {
    "returns its input": lambda *args: _first_tensor(args),
    "returns its first value, 0-d": lambda *args: _first_tensor(args).reshape(-1)[0],
    "returns x * 0 + x[0]": lambda *args: _first_tensor(args) * 0 + _first_tensor(args).reshape(-1)[0],
    "returns its values scaled and shifted": lambda *args: _first_tensor(args) * 1.5 + 0.25,
    "returns a shape made of its values": lambda *args: torch.zeros(
        tuple(int(abs(v) * 1000) % 60 + 1 for v in _first_tensor(args).reshape(-1)[:3].tolist())),
    "returns its values as integers": lambda *args: (_first_tensor(args) * 1000).long(),
    "returns its values, one of them NaN": lambda *args: torch.cat(
        [_first_tensor(args).reshape(-1), torch.tensor([float("nan")], dtype=_first_tensor(args).dtype)]),
    "raises ValueError saying its values": _raises_its_values,
    "raises a class named for its values": _raises_a_class_named_for_its_values,
    "returns an object of a class named for its values": lambda *args: type(
        "Leak_" + _digits(_first_tensor(args)), (), {})(),
    "a backward that raises its values": lambda *args: _BackwardSaysIt.apply(_first_tensor(args)),
    "changes its input in place": _changes_its_input,
}


def _hidden_checks(base: str, draw: int = 0) -> list:
    """The assignment's hidden checks, their cases drawn with every seed moved by ``draw`` (a fresh module)."""
    module = instructor.load_module(repo_course(), instructor.checks_module_name(base))
    if draw:
        module.generator = lambda seed: checks.generator(seed + draw)
    return [check for check in module.CHECKS.values() if not check.visible]


def _lines(base: str, echo, draw: int) -> dict[str, tuple[str, str] | None]:
    """grade id -> (the student's line, the instructor's line) of the echo attacker's first failure, or None."""
    lines = {}
    with torch.random.fork_rng():
        for check in _hidden_checks(base, draw):
            detail = evaluate(check, echo)
            lines[check.id] = None if detail is None else (public_text(detail), str(detail))
    return lines


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("base", ASSIGNMENTS)
def test_an_echo_attacker_reads_the_same_lines_whatever_the_hidden_inputs(base, language):
    told, differing = {}, 0
    with i18n.speaking(language):
        for name, echo in ECHOES.items():
            first, second = _lines(base, echo, 0), _lines(base, echo, SECOND_DRAW)
            for gid in first:
                if first[gid] is None or second[gid] is None:
                    assert first[gid] == second[gid], (name, gid, first[gid], second[gid])
                    continue
                differing += first[gid][1] != second[gid][1]
                if first[gid][0] != second[gid][0]:
                    told[(name, gid)] = (first[gid][0], second[gid][0])
    assert differing >= 10, "the two draws gave the same observations: the attack did not run"
    assert told == {}, f"a student's line changed with the hidden inputs: {told}"


def _solution(base: str, notebook: str) -> dict:
    """The reference solution's functions, defined as the notebook's set-up defines its names."""
    namespace = {"torch": torch, "F": F, "math": math}
    for source in notebooks.solution_answers(notebooks.read(REPO / "source" / base / notebook)).values():
        if "def " in source:
            exec(compile(source, f"<solution of {base}>", "exec"), namespace)
    return namespace


def _wrong_but_finite(function):
    """The right answer's shape, dtype and gradient path, every value wrong (scaled and shifted)."""
    return lambda *args: function(*args) * 1.5 + 0.25


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("base, notebook", ASSIGNMENTS.items())
def test_no_public_line_shows_a_value_the_reference_expected(base, notebook, language, monkeypatch):
    expected_values: list[torch.Tensor] = []
    compare = checks.compare

    def recording(got, expected, **kwargs):
        expected_values.append(torch.as_tensor(expected, dtype=torch.float64).detach())
        return compare(got, expected, **kwargs)

    monkeypatch.setattr(checks, "compare", recording)
    solution = _solution(base, notebook)
    failed, instructor_reads, shown = 0, 0, {}
    with i18n.speaking(language), torch.random.fork_rng():
        module = instructor.load_module(repo_course(), instructor.checks_module_name(base))
        module.compare = recording
        for check in module.CHECKS.values():
            if check.visible:
                continue
            expected_values.clear()
            detail = evaluate(check, _wrong_but_finite(solution[check.function]))
            if detail is None:
                continue
            failed += 1
            public = public_text(detail)
            for note in {public_note(case.note) for case in check.cases() if case.note}:
                # the grader's description of the case (tests/grading/test_case_notes.py), which may name a regime
                # whose answer is known ("beta * margin = -200", where the loss is 200)
                public = public.replace(note, "")
            numbers = {float(n) for n in re.findall(r"-?\d+\.\d+(?:e[+-]?\d+)?|-?\d+e[+-]?\d+", public)}
            values = {v for tensor in expected_values for v in tensor.reshape(-1).tolist() if v not in (0.0, 1.0, -1.0)}
            told = {n for n in numbers for v in values if math.isclose(n, v, rel_tol=5e-3)}
            told |= {f"{v:.4g}" for v in values if f"{v:.4g}" in public}
            if told:
                shown[check.id] = (public, told)
            instructor_reads += any(checks.short(expected) in str(detail) for expected in expected_values)
    hidden = sum(not check.visible for check in module.CHECKS.values())
    assert failed >= hidden // 2, f"only {failed} of {hidden} checks failed: the wrong answer was not judged"
    assert instructor_reads >= failed // 2, "the instructor's lines lost the expected values"
    assert shown == {}, f"a student's line shows a value the reference expected: {shown}"


def _significant_digits(number: str) -> int:
    """1000 and 1e3 have one, 0.001463 four, 21.78 four."""
    mantissa = number.lstrip("-").split("e")[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits if "." in mantissa else digits.rstrip("0"))


def _printed_as(number: str, value: float) -> bool:
    """Whether ``value``, printed to as many significant digits as ``number`` has, is ``number``."""
    return float(number) == float(f"{value:.{_significant_digits(number)}g}")


@pytest.mark.parametrize("base, notebook", ASSIGNMENTS.items())
def test_no_misconception_explanation_cites_a_hidden_input_or_answer(base, notebook, monkeypatch):
    """A named misconception's name, explanation and section are fixed text, the same for every student: a number
    of four or more significant digits in them (as failed lines used to print values) is neither a hidden case's
    input nor what the reference expected on one.  Fewer digits match some of the thousands of hidden values by
    chance; the explanations' own figures are measured in tests/grading/test_misconception_claims.py."""
    values: set[float] = set()
    compare = checks.compare

    def recording(got, expected, **kwargs):
        values.update(torch.as_tensor(expected, dtype=torch.float64).reshape(-1).tolist())
        return compare(got, expected, **kwargs)

    monkeypatch.setattr(checks, "compare", recording)
    solution = _solution(base, notebook)
    module = instructor.load_module(repo_course(), instructor.checks_module_name(base))
    module.compare = recording
    with torch.random.fork_rng():
        for check in module.CHECKS.values():
            if not check.visible:
                values.update(v for case in check.cases() for a in case.args if isinstance(a, torch.Tensor)
                              for v in a.detach().double().reshape(-1).tolist())
                evaluate(check, _wrong_but_finite(solution[check.function]))
    assert len(values) > 100  # the hidden inputs and answers were gathered
    catalogue = instructor.load_module(repo_course(), f"{base}_catalogue")
    cited = {}
    for name, misconception in catalogue.MISCONCEPTIONS.items():
        for language in LANGUAGES:
            named = misconception.named(name, "f", language)
            text = " ".join((named.name, named.explanation, named.section))
            for number in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", text):
                if _significant_digits(number) >= 4 and any(_printed_as(number, v) for v in values if v):
                    cited.setdefault(name, set()).add(number)
    assert cited == {}, f"misconception texts cite hidden inputs or answers: {cited}"


ECHO_ANSWER = '''
import torch

def kl_estimator_k3(log_p, ref_log_p):
    return log_p * 0 + log_p.reshape(-1)[0]
'''


def _graded_feedback(course_folder, draw: int) -> dict[str, bytes]:
    """The files an echo attacker of the KL assignment (both editions) receives, its hidden cases drawn with every
    seed moved by ``draw``: the instructor's module of this course copy draws them so, as a second term would."""
    import datetime as dt

    from rlhf_course.course.settings import Course
    from rlhf_course.grading import examples
    from tests.support.course import copy_course, release_course
    from tests.support.in_process_sandbox import grade_in_process

    course = release_course(copy_course(course_folder))
    if draw:
        module = course / "instructor" / "kl_penalty_hidden_checks.py"
        module.write_text(module.read_text() + f"\n\n_first_draw = generator\n\n\ndef generator(seed):\n"
                                                f"    return _first_draw(seed + {draw})\n")
    handle = Course.at(course)
    timestamp = dt.datetime(2026, 1, 5, 10, tzinfo=dt.timezone.utc)
    for assignment in ("kl_penalty", "kl_penalty_zh"):
        answers = notebooks.solution_answers(notebooks.read(course / "source" / assignment / "kl_penalty.ipynb"))
        answers = {gid: ECHO_ANSWER if "def " in source else source for gid, source in answers.items()}
        examples.write_submission(handle, "echo", answers, timestamp=timestamp, assignment=assignment,
                                  notebook="kl_penalty.ipynb")
    results = grade_in_process(handle)
    assert {r.state for r in results} == {"failed tests"}, [(r.assignment, r.state, r.detail) for r in results]
    folder = course / "feedback" / "echo"
    # submission_secret.txt: nbgrader's random token for each submission, drawn whatever the hidden inputs
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != "submission_secret.txt"}


def test_an_echo_attackers_feedback_pages_are_the_same_whatever_the_hidden_inputs(tmp_path):
    first, second = _graded_feedback(tmp_path / "first", 0), _graded_feedback(tmp_path / "second", SECOND_DRAW)
    assert any(name.endswith(".html") for name in first) and len(first) >= 2
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []
    pages = b"".join(first.values())
    assert "wrong value on this case".encode() in pages and "在这个用例上的值不正确".encode() in pages
